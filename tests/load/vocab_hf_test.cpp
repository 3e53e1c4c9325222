// HF tokenizer.json: a hand-made file encodes as hand-derived, GPT-2's encoder.json + vocab.bpe
// rebuilt as tokenizer.json encodes exactly like llama.cpp's GPT-2 vocab, pre-tokenizers are
// recognised, tokenizer_config.json is applied, and malformed files give typed errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "load/bpe_test_util.h"
#include "load/tokenizer.h"
#include "load/vocab_readers.h"
#include "testing.h"

namespace kvf {
namespace {

using load::PreTokenizer;
using load::Tokenizer;
using load::TokenType;
using load::Vocab;
using testing::temp_dir;
using testing::write_file;

constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A JSON string literal for s.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Swaps the first occurrence of `from` in s for `to` (the test's way to break one field).
std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at == std::string::npos) std::abort();
  return s.replace(at, from.size(), to);
}

constexpr const char* kByteLevelPre =
    R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";

// A hand-made byte-level tokenizer.json; pieces as in the BPE test's small vocab.
std::string small_json(const std::string& merges = R"(["a b", "b c", "ab c", "Ġ a", "a a"])",
                       const std::string& pre = kByteLevelPre, const std::string& extra = "") {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 8, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 9, "content": "<x>", "special": false}],
    "normalizer": null, "pre_tokenizer": )" + pre + R"(,
    "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},)" + extra + R"(
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
      "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "bc": 5, "abc": 6, "Ġa": 7, "aa": 10},
      "merges": )" + merges + "}}";
}

std::string llama3_pre(const std::string& regex) {
  return R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": )" + quote(regex) +
         R"(}, "behavior": "Isolated", "invert": false},)"
         R"( {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
}

TEST(HfTokenizer, SmallFileEncodesAndDecodesAsHandDerived) {
  Vocab v = testing::must(load::parse_hf_tokenizer(small_json(), "small.json"));
  EXPECT_EQ(v.kind, load::VocabKind::kBpe);
  EXPECT_EQ(v.pre, PreTokenizer::kGpt2);
  ASSERT_EQ(v.size(), 11);
  EXPECT_EQ(v.pieces[8], "<|end|>");
  EXPECT_EQ(v.types[8], TokenType::kControl);
  EXPECT_EQ(v.types[9], TokenType::kUserDefined);
  EXPECT_EQ(v.types[0], TokenType::kNormal);
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b", "b c", "ab c", "Ġ a", "a a"}));
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.bos, -1);
  EXPECT_EQ(v.eos, -1);  // no tokenizer_config.json and no usual end-of-text name
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int32_t>{6}));
  EXPECT_EQ(tok->encode("bcab", false), (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(tok->encode(" ab<|end|> a<x>aaa", false), (std::vector<int32_t>{3, 4, 8, 7, 9, 10, 0}));
  EXPECT_EQ(tok->decode({3, 4, 8, 7, 9, 10, 0}), " ab a<x>aaa");
}

TEST(HfTokenizer, MergesAsPairsReadLikeStrings) {
  Vocab pairs = testing::must(load::parse_hf_tokenizer(
      small_json(R"([["a", "b"], ["b", "c"], ["ab", "c"], ["Ġ", "a"], ["a", "a"]])"), "pairs.json"));
  EXPECT_EQ(pairs.merges, (std::vector<std::string>{"a b", "b c", "ab c", "Ġ a", "a a"}));
}

TEST(HfTokenizer, RecognisesLlama3AndQwen2Splits) {
  const std::string tmpl = R"("post_processor": {"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [], "special_tokens": {}}]},)";
  std::string json = small_json(R"(["a b"])", llama3_pre(kLlama3Regex));
  json = replace(json, R"("post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false,)"
                       R"( "use_regex": true},)", tmpl);
  json = replace(json, R"("byte_fallback": false,)", R"("byte_fallback": false, "ignore_merges": true,)");
  Vocab llama = testing::must(load::parse_hf_tokenizer(json, "llama3.json"));
  EXPECT_EQ(llama.pre, PreTokenizer::kLlama3);
  EXPECT_EQ(llama.bos, 8);  // the template's token before the sequence
  EXPECT_TRUE(llama.add_bos);
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(llama)));
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int32_t>{8, 6}));  // ignore_merges: "abc" is a piece
  Vocab qwen = testing::must(load::parse_hf_tokenizer(
      replace(small_json(R"(["a b"])", llama3_pre(kQwen2Regex)), R"("normalizer": null)", R"("normalizer": {"type": "NFC"})"),
      "qwen2.json"));
  EXPECT_EQ(qwen.pre, PreTokenizer::kQwen2);
  EXPECT_FALSE(qwen.add_bos);
}

TEST(HfTokenizer, UnknownPipelinesAreUnsupportedAndNamed) {
  struct Case { std::string json, needle; };
  const std::vector<Case> cases = {
      {small_json(R"(["a b"])", llama3_pre(R"(\p{L}+|\p{N}+)")), R"(\p{L}+|\p{N}+)"},
      {small_json(R"(["a b"])", R"({"type": "Metaspace", "replacement": "▁"})"), "Metaspace"},
      {small_json(R"(["a b"])", R"({"type": "ByteLevel", "add_prefix_space": true})"), "add_prefix_space"},
      {replace(small_json(), R"("decoder": {"type": "ByteLevel")", R"("decoder": {"type": "WordPiece")"), "WordPiece"},
      {replace(small_json(), R"("type": "BPE")", R"("type": "WordPiece")"), "model.type \"WordPiece\""},
      {replace(small_json(), R"("type": "BPE")", R"("type": "Unigram")"), "Unigram"},
      {replace(small_json(), R"("normalizer": null)", R"("normalizer": {"type": "Lowercase"})"), "Lowercase"},
      {replace(small_json(), R"("byte_fallback": false)", R"("byte_fallback": true)"), "byte_fallback"},
      {replace(small_json(), R"("continuing_subword_prefix": "")", R"("continuing_subword_prefix": "##")"),
       "continuing_subword_prefix"},
  };
  for (const Case& c : cases) {
    Result<Vocab> r = load::parse_hf_tokenizer(c.json, "t.json");
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported) << r.error().to_string();
    EXPECT_NE(r.error().message().find(c.needle), std::string::npos) << r.error().to_string();
    EXPECT_NE(r.error().message().find("t.json"), std::string::npos) << r.error().to_string();
  }
}

TEST(HfTokenizer, MalformedFilesGiveInvalidInputNamingTheField) {
  const std::string ok = small_json();
  struct Case { std::string json, needle; };
  const std::vector<Case> cases = {
      {"not json", "malformed JSON"},
      {"", "malformed JSON"},
      {ok.substr(0, ok.size() / 2), "malformed JSON"},
      {"[]", "(root)"},
      {"{}", "model: missing"},
      {R"({"model": []})", "model: is array"},
      {R"({"model": {"vocab": {}, "merges": []}})", "model.type: missing"},
      {R"({"model": {"type": 7}})", "model.type: is number"},
      {replace(ok, R"("vocab": {)", R"("vocab": 3, "x": {)"), "model.vocab: is number"},
      {replace(ok, R"("merges": [)", R"("merges": {"a": 1}, "x": [)"), "model.merges: is object"},
      {replace(ok, R"("b": 1,)", R"("b": "1",)"), "model.vocab[\"b\"]: is string"},
      {replace(ok, R"("b": 1,)", R"("b": -1,)"), "model.vocab[\"b\"]: token id -1 is out of range"},
      {replace(ok, R"("b": 1,)", R"("b": 1.5,)"), "model.vocab[\"b\"]"},
      {replace(ok, R"("b": 1,)", R"("b": 99999999999,)"), "out of range"},
      {replace(ok, R"("b": 1,)", R"("b": 0,)"), "is also used by model.vocab"},
      {replace(ok, R"("aa": 10)", R"("aa": 12)"), "contiguous"},
      {replace(ok, R"("aa": 10)", R"("aa": 1000000)"), "contiguous"},
      {small_json(R"(["a b", "bc"])"), "model.merges[1]: \"bc\" is not two pieces"},
      {small_json(R"(["a b", "c c"])"), "model.merges[1]: \"cc\" is not in model.vocab"},
      {small_json(R"(["a b", [1, 2]])"), "model.merges[1]: is array"},
      {small_json(R"(["a b", 5])"), "model.merges[1]: is number"},
      {replace(ok, R"("added_tokens": [)", R"("added_tokens": 1, "x": [)"), "added_tokens: is number"},
      {replace(ok, R"({"id": 8, "content")", R"({"content")"), "added_tokens[0].id: missing"},
      {replace(ok, R"("content": "<x>")", R"("content": 5)"), "added_tokens[1].content: is number"},
      {replace(ok, R"("content": "<x>")", R"("content": "")"), "added_tokens[1].content: is empty"},
      {replace(ok, R"("special": false})", R"("special": "no"})"), "added_tokens[1].special: is string"},
      {replace(ok, R"({"id": 9, "content": "<x>")", R"({"id": 2, "content": "<x>")"),
       "added_tokens[1].id: id 2 is also used by model.vocab[\"c\"]"},
      {replace(ok, R"({"id": 9, "content": "<x>")", R"({"id": 8, "content": "<x>")"),
       "added_tokens[1].id: id 8 is also used by added_tokens[0].id"},
      {replace(ok, R"("post_processor": {"type": "ByteLevel")",
               R"("post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}])"),
       "post_processor.single[0]: \"<s>\" is not a token"},
  };
  for (const Case& c : cases) {
    Result<Vocab> r = load::parse_hf_tokenizer(c.json, "bad.json");
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
    EXPECT_NE(r.error().message().find(c.needle), std::string::npos)
        << "want \"" << c.needle << "\" in " << r.error().to_string();
    EXPECT_EQ(r.error().message().rfind("bad.json: ", 0), 0u) << r.error().to_string();
  }
}

TEST(HfTokenizer, MangledFilesNeverCrash) {
  const std::string ok = small_json();
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  for (size_t cut = 0; cut < ok.size(); cut += 7) {
    Result<Vocab> r = load::parse_hf_tokenizer(ok.substr(0, cut), "cut.json");
    EXPECT_FALSE(r.ok()) << cut;
  }
  for (int i = 0; i < 2000; ++i) {
    std::string s = ok;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = "{}[]\",:0-9 aĠ\\\xff"[rng() % 17];
    Result<Vocab> r = load::parse_hf_tokenizer(s, "mangled.json");
    if (r.ok()) {
      Result<std::unique_ptr<Tokenizer>> t = Tokenizer::create(std::move(r).value());
      if (t.ok()) (*t)->encode("ab c<|end|>", true);
      else t.take_error();
    } else {
      EXPECT_TRUE(r.error().code() == ErrorCode::kInvalidInput || r.error().code() == ErrorCode::kUnsupported)
          << "seed " << seed << ": " << r.error().to_string();
    }
  }
}

TEST(HfTokenizer, ReadsTokenizerConfigBesideTheFile) {
  const std::string dir = temp_dir("hf_config");
  write_file(dir + "/tokenizer.json", small_json());
  Vocab plain = testing::must(load::read_hf_tokenizer(dir + "/tokenizer.json"));
  EXPECT_EQ(plain.eos, -1);
  write_file(dir + "/tokenizer_config.json",
             R"({"add_bos_token": true, "bos_token": {"content": "<x>", "lstrip": false}, "eos_token": "<|end|>",
                 "pad_token": null, "chat_template": "{{ x }}"})");
  Vocab v = testing::must(load::read_hf_tokenizer(dir + "/tokenizer.json"));
  EXPECT_EQ(v.bos, 9);
  EXPECT_EQ(v.eos, 8);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_EQ(v.pad, -1);
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{9, 4}));

  write_file(dir + "/tokenizer_config.json", R"({"eos_token": "</s>"})");
  Result<Vocab> bad = load::read_hf_tokenizer(dir + "/tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(bad.error().message().find("tokenizer_config.json: eos_token: \"</s>\" is not a token"), std::string::npos)
      << bad.error().to_string();
  write_file(dir + "/tokenizer_config.json", R"({"add_bos_token": "yes")");
  Result<Vocab> broken = load::read_hf_tokenizer(dir + "/tokenizer.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message().find("tokenizer_config.json: malformed JSON"), std::string::npos);
  write_file(dir + "/tokenizer_config.json", R"({"add_bos_token": "yes"})");
  Result<Vocab> wrong = load::read_hf_tokenizer(dir + "/tokenizer.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("add_bos_token: is string"), std::string::npos) << wrong.error().to_string();

  Result<Vocab> missing = load::read_hf_tokenizer(dir + "/nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(missing.error().message().find("nope.json"), std::string::npos);
}

// GPT-2's encoder.json + vocab.bpe written as an HF tokenizer.json.
std::optional<std::string> gpt2_tokenizer_json() {
  std::optional<std::string> enc = testing::model_file("gpt2-bpe/encoder.json");
  std::optional<std::string> bpe = testing::model_file("gpt2-bpe/vocab.bpe");
  if (!enc || !bpe) return std::nullopt;
  std::string merges;
  std::istringstream lines(testing::read_file(*bpe));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    merges += (merges.empty() ? "" : ",") + quote(line);
  }
  return R"({"version": "1.0", "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "special": true}],
    "normalizer": null, "pre_tokenizer": )" + std::string(kByteLevelPre) + R"(,
    "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": )" + testing::read_file(*enc) + R"(, "merges": [)" + merges + "]}}";
}

TEST(HfTokenizer, Gpt2FilesEncodeLikeTheGgufVocab) {
  std::optional<std::string> json = gpt2_tokenizer_json();
  std::optional<std::string> gguf = testing::model_file("llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  if (!json || !gguf) KVF_SKIP_MISSING("gpt2-bpe files or the gpt-2 vocab not present");
  Vocab hf = testing::must(load::parse_hf_tokenizer(*json, "gpt2/tokenizer.json"));
  Vocab gg = testing::must(testing::bpe_vocab_from_gguf(*gguf));
  EXPECT_EQ(hf.pieces, gg.pieces);  // SOURCES.md: identical tokens and merges
  EXPECT_EQ(hf.merges, gg.merges);
  EXPECT_EQ(hf.eos, 50256);        // <|endoftext|>, the usual end-of-text name
  EXPECT_FALSE(hf.add_bos);
  std::unique_ptr<Tokenizer> a = testing::must(Tokenizer::create(std::move(hf)));
  std::unique_ptr<Tokenizer> b = testing::must(Tokenizer::create(std::move(gg)));
  const testing::TokenizerVectors v = testing::read_vectors(*gguf + ".inp", *gguf + ".out");
  ASSERT_EQ(v.inputs.size(), v.ids.size());
  size_t passed = 0;
  for (size_t i = 0; i < v.inputs.size(); ++i) {
    const std::vector<int32_t> got = a->encode(v.inputs[i], false);
    EXPECT_EQ(got, b->encode(v.inputs[i], false)) << "vector " << i;
    EXPECT_EQ(got, v.ids[i]) << "vector " << i;
    passed += got == v.ids[i];
    EXPECT_EQ(a->decode(got), v.inputs[i]);
  }
  std::printf("[ vectors  ] gpt-2 via tokenizer.json: %zu/%zu passed\n", passed, v.inputs.size());
}

}  // namespace
}  // namespace kvf
