// Vocab from GGUF tokenizer.ggml.* metadata: model "llama" is SentencePiece-style (pieces,
// scores, token types), "gpt2" is byte-level BPE (pieces, merges, pre-tokenizer name), "bert"
// is WordPiece (pieces, token types, [CLS]/[SEP]/[UNK] ids, normalizer flags).
// Errors name the file and the key that is missing, mistyped, mis-sized or out of range.
#include <cmath>
#include <tuple>

#include "load/tokenizer_bpe.h"
#include "load/vocab_readers.h"

namespace kvf::load {
namespace {

constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";

Status read_tokens(const GgufFile& f, Vocab& v) {
  Result<std::vector<std::string>> t = f.get_strings(kTokens);
  if (!t) return t.take_error();
  if (t->empty()) return invalid_input(f.path, ": metadata ", kTokens, " is empty");
  v.pieces = std::move(*t);
  return Status();
}

// Scores are optional (all 0 when absent); present, they must match the tokens one to one.
Status read_scores(const GgufFile& f, Vocab& v) {
  const size_t n = v.pieces.size();
  if (!f.find(kScores)) {
    v.scores.assign(n, 0.0f);
    return Status();
  }
  Result<std::vector<double>> s = f.get_numbers(kScores);
  if (!s) return s.take_error();
  if (s->size() != n) return invalid_input(f.path, ": metadata ", kScores, " has ", s->size(), " entries for ", n, " tokens");
  v.scores.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan((*s)[i])) return invalid_input(f.path, ": metadata ", kScores, "[", i, "] is NaN");
    v.scores[i] = static_cast<float>((*s)[i]);
  }
  return Status();
}

// Token types are optional (all normal when absent); present, one per token, each 0..6.
Status read_types(const GgufFile& f, Vocab& v) {
  const size_t n = v.pieces.size();
  if (!f.find(kTypes)) {
    v.types.assign(n, TokenType::kNormal);
    return Status();
  }
  Result<std::vector<double>> t = f.get_numbers(kTypes);
  if (!t) return t.take_error();
  if (t->size() != n) return invalid_input(f.path, ": metadata ", kTypes, " has ", t->size(), " entries for ", n, " tokens");
  v.types.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = (*t)[i];
    if (!(x >= 0 && x <= 6) || x != std::floor(x)) {
      return invalid_input(f.path, ": metadata ", kTypes, "[", i, "] = ", x, " is not a token type 0..6");
    }
    v.types[i] = static_cast<TokenType>(static_cast<int32_t>(x));
  }
  return Status();
}

// A special token id: `fallback` when absent, -1 when stored as "none" (negative or
// 0xFFFFFFFF, as llama.cpp's converters write), an error when past the vocabulary.
Result<int32_t> special_id(const GgufFile& f, const std::string& key, int32_t n, int32_t fallback) {
  if (!f.find(key)) return fallback;
  Result<int64_t> id = f.get_int(key);
  if (!id) return id.take_error();
  if (*id < 0 || *id == 0xFFFFFFFFll) return -1;
  if (*id >= n) return invalid_input(f.path, ": metadata ", key, " = ", *id, " is outside the vocabulary of ", n);
  return static_cast<int32_t>(*id);
}

Result<bool> flag(const GgufFile& f, const std::string& key, bool fallback) {
  if (!f.find(key)) return fallback;
  return f.get_bool(key);
}

// bos/eos/unk/pad ids and the add_* flags, with the given defaults for absent keys.
Status read_specials(const GgufFile& f, Vocab& v, int32_t bos, int32_t eos, int32_t unk, bool add_bos) {
  const int32_t n = v.size();
  struct IdKey { const char* key; int32_t* out; int32_t fallback; };
  for (const IdKey& k : {IdKey{"tokenizer.ggml.bos_token_id", &v.bos, bos}, IdKey{"tokenizer.ggml.eos_token_id", &v.eos, eos},
                         IdKey{"tokenizer.ggml.unknown_token_id", &v.unk, unk},
                         IdKey{"tokenizer.ggml.padding_token_id", &v.pad, -1}}) {
    Result<int32_t> id = special_id(f, k.key, n, k.fallback);
    if (!id) return id.take_error();
    *k.out = *id;
  }
  Result<bool> b = flag(f, "tokenizer.ggml.add_bos_token", add_bos);
  if (!b) return b.take_error();
  Result<bool> e = flag(f, "tokenizer.ggml.add_eos_token", false);
  if (!e) return e.take_error();
  v.add_bos = *b;
  v.add_eos = *e;
  return Status();
}

Result<Vocab> spm_from_gguf(const GgufFile& f) {
  Vocab v;
  v.kind = VocabKind::kSpm;
  v.space = "\xe2\x96\x81";
  for (Status (*step)(const GgufFile&, Vocab&) : {read_tokens, read_scores, read_types}) {
    Status s = step(f, v);
    if (!s) return s.take_error();
  }
  // llama.cpp's defaults for SentencePiece vocabularies: <unk> 0, <s> 1, </s> 2.
  auto in_range = [&](int32_t id) { return id < v.size() ? id : -1; };
  Status s = read_specials(f, v, in_range(1), in_range(2), in_range(0), true);
  if (!s) return s.take_error();
  Result<bool> prefix = flag(f, "tokenizer.ggml.add_space_prefix", true);
  if (!prefix) return prefix.take_error();
  v.add_space_prefix = *prefix;
  return v;
}

Result<PreTokenizer> pre_tokenizer(const GgufFile& f) {
  std::string name;
  if (f.find("tokenizer.ggml.pre")) {
    Result<std::string> n = f.get_string("tokenizer.ggml.pre");
    if (!n) return n.take_error();
    name = std::move(*n);
  }
  const std::optional<PreTokenizer> pre = pre_tokenizer_named(name);
  if (!pre) {
    std::string known;
    for (PreTokenizer p : all_pre_tokenizers()) known += str_cat(known.empty() ? "" : ", ", pre_tokenizer_name(p));
    return unsupported(f.path, ": tokenizer.ggml.pre \"", name, "\" is not a supported pre-tokenizer (", known, ")");
  }
  return *pre;
}

Result<Vocab> bpe_from_gguf(const GgufFile& f) {
  Vocab v;
  v.kind = VocabKind::kBpe;
  v.add_space_prefix = false;
  Result<PreTokenizer> pre = pre_tokenizer(f);
  if (!pre) return pre.take_error();
  v.pre = *pre;
  for (Status (*step)(const GgufFile&, Vocab&) : {read_tokens, read_types}) {
    Status s = step(f, v);
    if (!s) return s.take_error();
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  Result<std::vector<std::string>> merges = f.get_strings("tokenizer.ggml.merges");
  if (!merges) return merges.take_error();
  v.merges = std::move(*merges);
  Status s = read_specials(f, v, -1, -1, -1, false);
  if (!s) return s.take_error();
  return v;
}

// BERT's WordPiece: [CLS] as BOS and [SEP] as EOS, both added; lower case and accent
// stripping as the normalizer keys say, by default on (BertNormalizer's defaults).
Result<Vocab> wpm_from_gguf(const GgufFile& f) {
  Vocab v;
  v.kind = VocabKind::kWpm;
  for (Status (*step)(const GgufFile&, Vocab&) : {read_tokens, read_types}) {
    Status s = step(f, v);
    if (!s) return s.take_error();
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  const int32_t n = v.size();
  struct IdKey { const char* key; int32_t* out; };
  for (const IdKey& k : {IdKey{"tokenizer.ggml.cls_token_id", &v.bos}, IdKey{"tokenizer.ggml.seperator_token_id", &v.eos},
                         IdKey{"tokenizer.ggml.unknown_token_id", &v.unk}, IdKey{"tokenizer.ggml.padding_token_id", &v.pad}}) {
    Result<int32_t> id = special_id(f, k.key, n, -1);
    if (!id) return id.take_error();
    *k.out = *id;
  }
  if (v.unk < 0) return invalid_input(f.path, ": a WordPiece vocabulary needs tokenizer.ggml.unknown_token_id");
  for (auto [key, out, fallback] : {std::tuple{"tokenizer.ggml.add_bos_token", &v.add_bos, true},
                                    std::tuple{"tokenizer.ggml.add_eos_token", &v.add_eos, true},
                                    std::tuple{"tokenizer.ggml.normalizer.lowercase", &v.lowercase, true}}) {
    Result<bool> b = flag(f, key, fallback);
    if (!b) return b.take_error();
    *out = *b;
  }
  Result<bool> strip = flag(f, "tokenizer.ggml.normalizer.strip_accents", v.lowercase);
  if (!strip) return strip.take_error();
  v.strip_accents = *strip;
  return v;
}

}  // namespace

Result<Vocab> vocab_from_gguf(const GgufFile& f) {
  Result<std::string> model = f.get_string("tokenizer.ggml.model");
  if (!model) return model.take_error();
  if (*model == "llama") return spm_from_gguf(f);
  if (*model == "gpt2") return bpe_from_gguf(f);
  if (*model == "bert") return wpm_from_gguf(f);
  return unsupported(f.path, ": tokenizer.ggml.model \"", *model, "\" is not supported (llama, gpt2 and bert are)");
}

}  // namespace kvf::load
