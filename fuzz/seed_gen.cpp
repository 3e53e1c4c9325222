// Writes small valid seed files for the fuzz targets: synthetic GGUF / llama2.c / tokenizer.bin /
// tokenizer.json / safetensors files, plus cut-down copies of ../shared/models and tests/fixtures.
// Usage: seed_gen OUT_DIR [MODELS_DIR [FIXTURES_DIR]]; writes OUT_DIR/<target>/<seed>.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "load/ggml_types.h"
#include "load/gguf_writer.h"
#include "models/export_gguf.h"
#include "models/model.h"
#include "load/safetensors.h"
#include "load/tokenizer_bpe.h"
#include "load/vocab_readers.h"

using namespace kvf;
using load::GgufValue;
using load::GgufValueType;
using load::TokenType;
using load::Vocab;
namespace fs = std::filesystem;

namespace {

fs::path g_out;
int g_written = 0;

void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(g_out / target);
  std::ofstream f(g_out / target / name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ++g_written;
}
void put_text(const std::string& target, const std::string& name, const std::string& s) {
  put(target, name, std::vector<uint8_t>(s.begin(), s.end()));
}
void put_gguf(const std::string& name, const std::vector<uint8_t>& bytes) {  // both GGUF targets
  put("gguf_fuzz", name, bytes);
  put("gguf_vocab_fuzz", name, bytes);
}

// Deterministic filler bytes (an LCG), so seeds do not change from run to run.
std::vector<uint8_t> filler(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  for (uint8_t& x : b) x = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  return b;
}
template <class T>
void append(std::vector<uint8_t>& b, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}

GgufValue scalar(GgufValueType t, load::GgufScalar s) { return GgufValue{t, std::move(s), {}, {}}; }
GgufValue array(GgufValueType et, std::vector<load::GgufScalar> a) { return GgufValue{GgufValueType::kArray, {}, et, std::move(a)}; }

// Every metadata value type, and a small tensor of every ggml type kvforge knows.
void gguf_all_types() {
  load::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set("t.u8", scalar(GgufValueType::kU8, uint64_t{200}));
  w.set("t.i8", scalar(GgufValueType::kI8, int64_t{-100}));
  w.set("t.u16", scalar(GgufValueType::kU16, uint64_t{60000}));
  w.set("t.i16", scalar(GgufValueType::kI16, int64_t{-30000}));
  w.set("t.u32", scalar(GgufValueType::kU32, uint64_t{4000000000u}));
  w.set("t.i32", scalar(GgufValueType::kI32, int64_t{-2000000000}));
  w.set("t.f32", scalar(GgufValueType::kF32, 0.25));
  w.set("t.bool", scalar(GgufValueType::kBool, true));
  w.set("t.u64", scalar(GgufValueType::kU64, uint64_t{1} << 63));
  w.set("t.i64", scalar(GgufValueType::kI64, int64_t{-5}));
  w.set("t.f64", scalar(GgufValueType::kF64, -1e300));
  w.set("t.strings", array(GgufValueType::kString, {std::string("a"), std::string(""), std::string("\xe2\x96\x81x")}));
  w.set("t.u8s", array(GgufValueType::kU8, {uint64_t{1}, uint64_t{2}}));
  w.set("t.bools", array(GgufValueType::kBool, {true, false}));
  w.set("t.f64s", array(GgufValueType::kF64, {1.5, -2.0}));
  for (uint32_t type = 0; type < 64; ++type) {
    Result<load::GgmlTypeInfo> info = load::ggml_type_info(type);
    if (!info.ok()) continue;
    const int64_t blocks = 2;
    Status s = w.add_tensor("w." + info->name, type, {info->block_elems, blocks},
                            filler(static_cast<size_t>(info->block_bytes * blocks), type));
    if (!s.ok()) std::fprintf(stderr, "seed_gen: %s\n", s.error().to_string().c_str());
  }
  put_gguf("all_types.gguf", w.serialize());
  w.set("general.alignment", scalar(GgufValueType::kU32, uint64_t{64}));
  put_gguf("align64.gguf", w.serialize());
}

// tokenizer.ggml.* for a vocab; model "llama" (SPM), "gpt2" (BPE, with pre) or "bert" (WordPiece).
std::vector<uint8_t> vocab_gguf(const Vocab& v, const std::string& pre) {
  load::GgufWriter w;
  const bool spm = v.kind == load::VocabKind::kSpm;
  const bool wpm = v.kind == load::VocabKind::kWpm;
  w.set_string("general.architecture", wpm ? "bert" : "llama");
  w.set_string("tokenizer.ggml.model", spm ? "llama" : wpm ? "bert" : "gpt2");
  if (!spm && !wpm) w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", v.pieces);
  if (spm) w.set_f32s("tokenizer.ggml.scores", v.scores);
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int32_t>(t));
  w.set_i32s("tokenizer.ggml.token_type", types);
  if (!spm && !wpm) w.set_strings("tokenizer.ggml.merges", v.merges);
  if (v.bos >= 0) w.set_u32(wpm ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.set_u32(wpm ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  Status s = w.add_tensor("token_embd.weight", 0, {4, 2}, filler(32, 7));
  if (!s.ok()) std::fprintf(stderr, "seed_gen: %s\n", s.error().to_string().c_str());
  return w.serialize();
}

// A WordPiece vocab: [UNK] [CLS] [SEP], the printable ASCII characters as word starts and as
// continuations, and a few words.
Vocab synthetic_wpm() {
  Vocab v;
  v.kind = load::VocabKind::kWpm;
  v.pieces = {"[UNK]", "[CLS]", "[SEP]"};
  for (char c = '!'; c <= '~'; ++c) {
    v.pieces.push_back("\xe2\x96\x81" + std::string(1, c));
    v.pieces.push_back(std::string(1, c));
  }
  for (const char* w : {"\xe2\x96\x81" "the", "\xe2\x96\x81" "play", "ing", "ed", "\xe2\x96\x81" "\xe4\xbd\xa0"}) v.pieces.push_back(w);
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  v.types[0] = TokenType::kUnknown;
  v.types[1] = v.types[2] = TokenType::kControl;
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

// A SentencePiece-style vocab: <unk> <s> </s>, 256 byte tokens, a few scored pieces and one
// user-defined piece. `space` is '▁' (GGUF) or ' ' (llama2.c).
Vocab synthetic_spm(const std::string& space) {
  Vocab v;
  v.space = space;
  auto add = [&](std::string p, float score, TokenType t) {
    v.pieces.push_back(std::move(p));
    v.scores.push_back(score);
    v.types.push_back(t);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, TokenType::kByte);
  }
  float score = 0;
  for (const char* p : {"_", "e", "t", "h", "l", "o", "w", "r", "d", "_t", "he", "_the", "ll", "llo", "_he", "_hello",
                        "_w", "or", "ld", "_world", "!", "1", "12", "123", "\xc3\xa9"}) {
    std::string piece = p;
    for (size_t at; (at = piece.find('_')) != std::string::npos;) piece.replace(at, 1, space);
    add(piece, score -= 1, TokenType::kNormal);
  }
  add("<|user|>", 0, TokenType::kUserDefined);
  v.unk = 0, v.bos = 1, v.eos = 2;
  return v;
}

// llama2.c tokenizer.bin bytes: int32 max_token_length, then (f32 score, int32 len, bytes).
std::vector<uint8_t> tokenizer_bin(const Vocab& v) {
  std::vector<uint8_t> b;
  int32_t max_len = 1;
  for (const std::string& p : v.pieces) max_len = std::max(max_len, static_cast<int32_t>(p.size()));
  append<int32_t>(b, v.size());  // the fuzz target's vocab-size prefix
  append<int32_t>(b, max_len);
  for (int32_t i = 0; i < v.size(); ++i) {
    append<float>(b, v.scores[static_cast<size_t>(i)]);
    const std::string& p = v.pieces[static_cast<size_t>(i)];
    append<int32_t>(b, static_cast<int32_t>(p.size()));
    b.insert(b.end(), p.begin(), p.end());
  }
  return b;
}

// A byte-level BPE vocab: GPT-2's 256-character alphabet, merges learned greedily from a
// sample text, and a control token <|endoftext|>.
Vocab synthetic_bpe() {
  Vocab v;
  v.kind = load::VocabKind::kBpe;
  v.add_bos = false;
  v.add_space_prefix = false;
  for (int b = 0; b < 256; ++b) v.pieces.push_back(load::bytes_to_bpe_unicode(std::string(1, static_cast<char>(b))));
  std::vector<std::vector<std::string>> words;
  const std::string text = "the quick brown fox jumps over the lazy dog hello world hello there 12345 the end";
  for (size_t at = 0; at < text.size();) {
    size_t sp = text.find(' ', at + 1);
    if (sp == std::string::npos) sp = text.size();
    std::vector<std::string> w;
    for (char c : text.substr(at, sp - at)) w.push_back(load::bytes_to_bpe_unicode(std::string(1, c)));
    words.push_back(w);
    at = sp;
  }
  for (int round = 0; round < 40; ++round) {
    std::map<std::pair<std::string, std::string>, int> count;
    for (const auto& w : words) for (size_t i = 0; i + 1 < w.size(); ++i) ++count[{w[i], w[i + 1]}];
    if (count.empty()) break;
    auto best = count.begin();
    for (auto it = count.begin(); it != count.end(); ++it) if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    v.merges.push_back(a + " " + b);
    v.pieces.push_back(a + b);
    for (auto& w : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        if (w[i] == a && w[i + 1] == b) w[i] += w[i + 1], w.erase(w.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
  }
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  v.pieces.push_back("<|endoftext|>");
  v.types.push_back(TokenType::kControl);
  v.eos = v.size() - 1;
  v.scores.assign(v.pieces.size(), 0.0f);
  return v;
}

// The vocab as HF tokenizer.json, with pre-tokenizer `pre` ("gpt2", "llama3" or "qwen2").
std::string hf_json(const Vocab& v, const std::string& pre) {
  using json = nlohmann::ordered_json;
  json vocab = json::object(), merges = json::array(), added = json::array();
  for (int32_t i = 0; i < v.size(); ++i) {
    if (v.types[static_cast<size_t>(i)] == TokenType::kControl) added.push_back({{"id", i}, {"content", v.pieces[static_cast<size_t>(i)]}, {"special", true}});
    else vocab[v.pieces[static_cast<size_t>(i)]] = i;
  }
  for (const std::string& m : v.merges) {
    const size_t sp = m.find(' ', 1);
    if (pre == "qwen2") merges.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
    else merges.push_back(m);
  }
  json root = {{"version", "1.0"}, {"added_tokens", added}, {"normalizer", nullptr}};
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", pre == "gpt2"}};
  if (pre == "gpt2") {
    root["pre_tokenizer"] = byte_level;
  } else {
    const load::PreTokenizer p = pre == "llama3" ? load::PreTokenizer::kLlama3 : load::PreTokenizer::kQwen2;
    const json split = {{"type", "Split"}, {"pattern", {{"Regex", load::bpe_split_regexes(p)[0]}}}, {"behavior", "Isolated"}, {"invert", false}};
    root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
    if (pre == "qwen2") root["normalizer"] = {{"type", "NFC"}};
  }
  if (pre == "llama3" && v.eos >= 0) {
    json bos = json::object(), seq = json::object();
    bos["SpecialToken"] = {{"id", v.pieces[static_cast<size_t>(v.eos)]}, {"type_id", 0}};
    seq["Sequence"] = {{"id", "A"}, {"type_id", 0}};
    const json tmpl = {{"type", "TemplateProcessing"}, {"single", json::array({bos, seq})}};
    root["post_processor"] = {{"type", "Sequence"}, {"processors", json::array({byte_level, tmpl})}};
  }
  root["decoder"] = {{"type", "ByteLevel"}};
  root["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"byte_fallback", false},
                   {"ignore_merges", pre == "llama3"}, {"vocab", vocab}, {"merges", merges}};
  return root.dump(1);
}

// A llama.cpp-converted GPT-2 vocab cut to its first n tokens and the merges that stay valid.
bool gpt2_subset(const fs::path& file, size_t n, Vocab& v) {
  Result<load::GgufFile> f = load::read_gguf(file.string());
  if (!f.ok()) return false;
  Result<Vocab> full = load::vocab_from_gguf(*f);
  if (!full.ok()) return false;
  v = std::move(*full);
  v.pieces.resize(std::min(n, v.pieces.size()));
  v.types.resize(v.pieces.size());
  const std::set<std::string> kept(v.pieces.begin(), v.pieces.end());
  std::vector<std::string> merges;
  for (const std::string& m : v.merges) {
    const size_t sp = m.find(' ', 1);
    if (sp != std::string::npos && kept.count(m.substr(0, sp)) && kept.count(m.substr(sp + 1)) &&
        kept.count(m.substr(0, sp) + m.substr(sp + 1))) merges.push_back(m);
  }
  v.merges = std::move(merges);
  v.pieces.push_back("<|endoftext|>");
  v.types.push_back(TokenType::kControl);
  v.bos = v.eos = v.size() - 1;
  v.unk = v.pad = -1;
  v.scores.assign(v.pieces.size(), 0.0f);
  return true;
}

// A llama2.c checkpoint with the given header and filler weights (vocab < 0: unshared classifier).
std::vector<uint8_t> llama2c(int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv_heads, int32_t vocab,
                             int32_t seq_len) {
  std::vector<uint8_t> b;
  for (int32_t x : {dim, hidden, layers, heads, kv_heads, vocab, seq_len}) append<int32_t>(b, x);
  const int64_t v = vocab < 0 ? -vocab : vocab, head = dim / heads, kv_dim = head * kv_heads;
  int64_t floats = v * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim) + dim + seq_len * head;
  if (vocab < 0) floats += v * dim;
  for (int64_t i = 0; i < floats; ++i) append<float>(b, static_cast<float>(i % 17) * 0.125f - 1.0f);
  return b;
}

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Seeds made from ../shared/models when it is there: real tokenizer.bin files (with the vocab-size
// prefix), stories260K.gguf without its large tensors, and a cut-down GPT-2 vocab.
void from_models(const fs::path& models) {
  const std::pair<const char*, int32_t> bins[] = {{"stories260K/tok512.bin", 512}, {"aidreams260K/tok512.bin", 512},
                                                  {"llama2c-pr468-relu260K/tok1024.bin", 1024}};
  for (const auto& [rel, n] : bins) {
    if (!fs::exists(models / rel)) continue;
    std::vector<uint8_t> b;
    append<int32_t>(b, n);
    const std::vector<uint8_t> file = slurp(models / rel);
    b.insert(b.end(), file.begin(), file.end());
    put("tokenizer_bin_fuzz", fs::path(rel).parent_path().string() + ".bin", b);
  }
  Result<load::GgufFile> st = load::read_gguf((models / "stories260K/stories260K.gguf").string());
  if (st.ok()) {
    load::GgufWriter w;
    for (const auto& [k, val] : st->metadata) w.set(k, val);
    for (const load::GgufTensorInfo& t : st->tensors) {
      if (t.nbytes > 1024) continue;
      const uint8_t* p = st->bytes().data() + st->data_offset + t.offset;
      Status s = w.add_tensor(t.name, t.type, t.ne, std::span<const uint8_t>(p, static_cast<size_t>(t.nbytes)));
      if (!s.ok()) std::fprintf(stderr, "seed_gen: %s\n", s.error().to_string().c_str());
    }
    put_gguf("stories260K_small.gguf", w.serialize());
  }
  Vocab gpt2;
  if (gpt2_subset(models / "llama.cpp-vocab/ggml-vocab-gpt-2.gguf", 400, gpt2)) {
    put_gguf("gpt2_400.gguf", vocab_gguf(gpt2, "gpt-2"));
    put_text("tokenizer_json_fuzz", "gpt2_400.json", hf_json(gpt2, "gpt2"));
  }
}

// A safetensors file: u64 header length, the JSON header padded with spaces to 8 bytes, data.
struct StTensor {
  std::string name, dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};
std::vector<uint8_t> safetensors(const std::vector<StTensor>& ts, bool with_metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (with_metadata) header["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  for (const StTensor& t : ts) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::vector<uint8_t> b;
  append<uint64_t>(b, text.size());
  b.insert(b.end(), text.begin(), text.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// Every dtype kvforge borrows, some it refuses, a scalar, an empty tensor and a misaligned one.
void safetensors_synthetic() {
  const std::vector<StTensor> ts = {
      {"a.f32", "F32", {2, 3}, filler(24, 1)}, {"b.f16", "F16", {4}, filler(8, 2)},
      {"c.bf16", "BF16", {2, 2}, filler(8, 3)}, {"d.i32", "I32", {3}, filler(12, 4)},
      {"e.i64", "I64", {2}, filler(16, 5)},     {"f.scalar", "F32", {}, filler(4, 6)},
      {"g.empty", "F32", {0, 4}, {}},            {"h.i8", "I8", {3}, filler(3, 7)},
      {"i.misaligned", "F32", {2}, filler(8, 8)}, {"j.bool", "BOOL", {1}, {1}}, {"k.u8", "U8", {2}, filler(2, 9)}};
  put("safetensors_fuzz", "synthetic.safetensors", safetensors(ts, true));
  put("safetensors_fuzz", "one.safetensors", safetensors({ts[0]}, false));
}

// Each fixture family's config.json as is, and its safetensors cut to its small tensors.
void from_fixtures(const fs::path& fixtures) {
  for (const auto& family : fs::directory_iterator(fixtures)) {
    const std::string name = family.path().filename().string();
    if (fs::exists(family.path() / "config.json")) put("hf_config_fuzz", name + ".json", slurp(family.path() / "config.json"));
    for (const char* adapter : {"a1", "a2"}) {
      const fs::path config = family.path() / "adapters" / adapter / "adapter_config.json";
      if (fs::exists(config)) put("lora_config_fuzz", name + "_" + adapter + ".json", slurp(config));
    }
    const std::vector<uint8_t> bytes = slurp(family.path() / "model.safetensors");
    Result<load::SafetensorsSet> set = load::parse_safetensors_bytes(bytes, name);
    if (!set.ok()) continue;
    std::vector<StTensor> small;
    for (const std::string& t : set->names()) {
      const load::SafetensorsTensorInfo* info = set->find(t);
      if (info->end - info->begin > 512 || small.size() >= 12) continue;
      const uint8_t* p = set->shards()[info->shard].data.data() + info->begin;
      small.push_back({t, info->dtype, info->shape, std::vector<uint8_t>(p, p + (info->end - info->begin))});
    }
    put("safetensors_fuzz", name + "_small.safetensors", safetensors(small, true));
  }
}

// A completions body with every sampling field, a chat body with text parts and logprobs,
// and a /tokenize body.
void openai_requests() {
  put_text("openai_request_fuzz", "completions.json",
           R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 4, "seed": 3, )"
           R"("stop": ["a", "b"], "n": 2, "stream": true, "stream_options": {"include_usage": true}, "logprobs": 2, )"
           R"("echo": true, "logit_bias": {"5": -100}, "presence_penalty": 0.5, "frequency_penalty": 0.1})");
  put_text("openai_request_fuzz", "chat.json",
           R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}], )"
           R"("logprobs": true, "top_logprobs": 3, "tools": [], "max_completion_tokens": 4, "response_format": {"type": "text"}})");
  put_text("openai_request_fuzz", "tokenize.json", R"({"tokens": [1, 2, 3], "content": "a", "add_special": false})");
}

// Whole checkpoints for the model targets: each fixture family as u32 n + config.json +
// model.safetensors (model_safetensors_fuzz) and, where the exporter takes it, as f16 GGUF
// (model_gguf_fuzz).
void models_from_fixtures(const fs::path& fixtures) {
  for (const auto& family : fs::directory_iterator(fixtures)) {
    const fs::path dir = family.path();
    const std::string name = dir.filename().string();
    if (!fs::exists(dir / "config.json") || !fs::exists(dir / "model.safetensors")) continue;
    const std::vector<uint8_t> config = slurp(dir / "config.json"), weights = slurp(dir / "model.safetensors");
    std::vector<uint8_t> b;
    append<uint32_t>(b, static_cast<uint32_t>(config.size()));
    b.insert(b.end(), config.begin(), config.end());
    b.insert(b.end(), weights.begin(), weights.end());
    put("model_safetensors_fuzz", name + ".bin", b);
    Result<models::Model> m = models::open_model(dir.string());
    if (!m.ok()) continue;
    const fs::path gguf = g_out / (name + ".tmp.gguf");
    if (models::export_gguf(*m, gguf.string(), {.outtype = DType::kF16, .progress = {}}).ok()) {
      put("model_gguf_fuzz", name + ".gguf", slurp(gguf));
    }
    fs::remove(gguf);
  }
}

// Request files: prompts and ids, every key, a blank line.
void batch_requests() {
  put_text("batch_jsonl_fuzz", "requests.jsonl",
           "{\"id\": \"a\", \"prompt\": \"And it came to pass\", \"max_tokens\": 8, \"temperature\": 0.7, \"seed\": 3}\n"
           "\n"
           "{\"id\": 2, \"ids\": [1, 2, 3], \"max_tokens\": 0}\n"
           "{\"prompt\": \"In the beginning\"}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: seed_gen OUT_DIR [MODELS_DIR [FIXTURES_DIR]]\n");
    return 2;
  }
  g_out = argv[1];
  gguf_all_types();
  const Vocab spm = synthetic_spm("\xe2\x96\x81");
  put_gguf("spm.gguf", vocab_gguf(spm, ""));
  put("tokenizer_bin_fuzz", "synthetic.bin", tokenizer_bin(synthetic_spm(" ")));
  const Vocab bpe = synthetic_bpe();
  put_gguf("wpm.gguf", vocab_gguf(synthetic_wpm(), ""));
  for (const char* pre : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "starcoder"}) put_gguf(std::string("bpe_") + pre + ".gguf", vocab_gguf(bpe, pre));
  for (const char* pre : {"gpt2", "llama3", "qwen2"}) put_text("tokenizer_json_fuzz", std::string("bpe_") + pre + ".json", hf_json(bpe, pre));
  put("llama2c_fuzz", "shared.bin", llama2c(8, 16, 2, 2, 1, 32, 4));
  put("llama2c_fuzz", "unshared.bin", llama2c(8, 12, 1, 4, 2, -16, 2));
  safetensors_synthetic();
  openai_requests();
  batch_requests();
  if (argc > 2 && fs::is_directory(argv[2])) from_models(argv[2]);
  if (argc > 3 && fs::is_directory(argv[3])) from_fixtures(argv[3]);
  if (argc > 3 && fs::is_directory(argv[3])) models_from_fixtures(argv[3]);
  std::printf("seed_gen: wrote %d seed files under %s\n", g_written, g_out.c_str());
  return 0;
}
