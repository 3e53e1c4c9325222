// GGUF tokenizer metadata to Vocab: llama.cpp's own vocab files, and hand-written GGUFs with
// missing, mis-sized and out-of-range fields that must give typed errors naming the key.
#include <gtest/gtest.h>

#include "load/gguf.h"
#include "load/gguf_writer.h"
#include "load/vocab_readers.h"
#include "testing.h"

namespace kvf {
namespace {

using load::GgufWriter;
using load::TokenType;
using load::Vocab;

GgufWriter spm_writer() {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81" "a"});
  w.set_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, -1.5f});
  w.set_i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1});
  return w;
}

GgufWriter bpe_writer(const std::string& pre) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"});
  w.set_i32s("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.set_strings("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.bos_token_id", 3);
  w.set_u32("tokenizer.ggml.eos_token_id", 3);
  return w;
}

Result<Vocab> vocab_of(const GgufWriter& w) {
  const std::vector<uint8_t> bytes = w.serialize();
  Result<load::GgufFile> f = load::parse_gguf_bytes(bytes, "t.gguf");
  if (!f) return f.take_error();
  return load::vocab_from_gguf(*f);  // the Vocab owns its strings: bytes may go
}

void expect_error(const GgufWriter& w, ErrorCode code, const std::string& needle) {
  Result<Vocab> v = vocab_of(w);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), code) << v.error().to_string();
  EXPECT_NE(v.error().message().find("t.gguf"), std::string::npos) << v.error().message();
  EXPECT_NE(v.error().message().find(needle), std::string::npos) << v.error().message();
}

TEST(GgufVocab, SpmFieldsAndDefaults) {
  Vocab v = testing::must(vocab_of(spm_writer()));
  EXPECT_EQ(v.kind, load::VocabKind::kSpm);
  ASSERT_EQ(v.size(), 5);
  EXPECT_EQ(v.pieces[4], "\xe2\x96\x81" "a");
  EXPECT_EQ(v.scores[4], -1.5f);
  EXPECT_EQ(v.types[0], TokenType::kUnknown);
  EXPECT_EQ(v.types[3], TokenType::kByte);
  EXPECT_EQ(v.space, "\xe2\x96\x81");
  EXPECT_EQ(v.unk, 0);  // llama.cpp's defaults when the ids are not stored
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.pad, -1);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_TRUE(v.add_space_prefix);

  GgufWriter w = spm_writer();
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none", as llama.cpp writes it
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  Vocab u = testing::must(vocab_of(w));
  EXPECT_EQ(u.bos, 2);
  EXPECT_EQ(u.pad, -1);
  EXPECT_FALSE(u.add_bos);
  EXPECT_TRUE(u.add_eos);
  EXPECT_FALSE(u.add_space_prefix);
}

TEST(GgufVocab, SpmErrorsNameTheKey) {
  GgufWriter scores = spm_writer();
  scores.set_f32s("tokenizer.ggml.scores", {0, 0});
  expect_error(scores, ErrorCode::kInvalidInput, "tokenizer.ggml.scores has 2 entries for 5 tokens");
  GgufWriter types = spm_writer();
  types.set_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1});
  expect_error(types, ErrorCode::kInvalidInput, "tokenizer.ggml.token_type has 6 entries");
  GgufWriter bad_type = spm_writer();
  bad_type.set_i32s("tokenizer.ggml.token_type", {1, 1, 9, 1, 1});
  expect_error(bad_type, ErrorCode::kInvalidInput, "tokenizer.ggml.token_type[2]");
  GgufWriter bos = spm_writer();
  bos.set_u32("tokenizer.ggml.bos_token_id", 5);
  expect_error(bos, ErrorCode::kInvalidInput, "tokenizer.ggml.bos_token_id = 5 is outside");
  GgufWriter nan = spm_writer();
  nan.set_f32s("tokenizer.ggml.scores", {0, 0, 0, 0, std::nanf("")});
  expect_error(nan, ErrorCode::kInvalidInput, "tokenizer.ggml.scores[4] is NaN");
  GgufWriter tokens;
  tokens.set_string("tokenizer.ggml.model", "llama");
  expect_error(tokens, ErrorCode::kInvalidInput, "tokenizer.ggml.tokens is missing");
  GgufWriter flag = spm_writer();
  flag.set_u32("tokenizer.ggml.add_bos_token", 1);
  expect_error(flag, ErrorCode::kInvalidInput, "tokenizer.ggml.add_bos_token");
}

TEST(GgufVocab, ModelAndPreTokenizerNames) {
  GgufWriter other;
  other.set_string("tokenizer.ggml.model", "t5");
  expect_error(other, ErrorCode::kUnsupported, "tokenizer.ggml.model \"t5\"");
  expect_error(GgufWriter(), ErrorCode::kInvalidInput, "tokenizer.ggml.model is missing");
  const std::vector<std::pair<std::string, load::PreTokenizer>> known = {
      {"gpt-2", load::PreTokenizer::kGpt2},      {"default", load::PreTokenizer::kGpt2},
      {"", load::PreTokenizer::kGpt2},           {"llama-bpe", load::PreTokenizer::kLlama3},
      {"llama3", load::PreTokenizer::kLlama3},   {"qwen2", load::PreTokenizer::kQwen2},
      {"deepseek-coder", load::PreTokenizer::kDeepseekCoder}, {"deepseek-llm", load::PreTokenizer::kDeepseekLlm},
      {"deepseek-v3", load::PreTokenizer::kDeepseek3},        {"falcon", load::PreTokenizer::kFalcon},
      {"starcoder", load::PreTokenizer::kStarcoder},          {"refact", load::PreTokenizer::kStarcoder}};
  for (const auto& [name, pre] : known) {
    Vocab v = testing::must(vocab_of(bpe_writer(name)));
    EXPECT_EQ(v.kind, load::VocabKind::kBpe);
    EXPECT_EQ(v.pre, pre) << name;
    EXPECT_EQ(v.merges, std::vector<std::string>{"a b"});
    EXPECT_EQ(v.bos, 3);
    EXPECT_EQ(v.eos, 3);
    EXPECT_FALSE(v.add_bos);
    EXPECT_EQ(v.types[3], TokenType::kControl);
  }
  expect_error(bpe_writer("chatglm-bpe"), ErrorCode::kUnsupported, "tokenizer.ggml.pre \"chatglm-bpe\"");
  GgufWriter merges = bpe_writer("gpt-2");
  merges.set_strings("tokenizer.ggml.merges", {});
  Vocab empty = testing::must(vocab_of(merges));
  EXPECT_TRUE(empty.merges.empty());
  GgufWriter eos = bpe_writer("gpt-2");
  eos.set_u32("tokenizer.ggml.eos_token_id", 4);
  expect_error(eos, ErrorCode::kInvalidInput, "tokenizer.ggml.eos_token_id");
}

TEST(GgufVocab, LlamaCppVocabFiles) {
  std::optional<std::string> spm = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  std::optional<std::string> phi3 = testing::model_file("llama.cpp-vocab/ggml-vocab-phi-3.gguf");
  std::optional<std::string> bert = testing::model_file("llama.cpp-vocab/ggml-vocab-bert-bge.gguf");
  if (!spm || !phi3 || !bert) KVF_SKIP_MISSING("llama.cpp vocab files not present");
  Vocab v = testing::must(load::vocab_from_gguf(testing::must(load::read_gguf(*spm))));
  EXPECT_EQ(v.size(), 32000);  // SOURCES.md: the Llama 2 vocabulary
  EXPECT_EQ(v.pieces[15043], "\xe2\x96\x81" "Hello");
  EXPECT_EQ(v.types[1], TokenType::kControl);
  EXPECT_EQ(v.types[3], TokenType::kByte);
  Vocab p = testing::must(load::vocab_from_gguf(testing::must(load::read_gguf(*phi3))));
  EXPECT_EQ(p.size(), 32064);
  EXPECT_EQ(p.eos, 32000);
  EXPECT_EQ(p.pad, 32000);
  Vocab b = testing::must(load::vocab_from_gguf(testing::must(load::read_gguf(*bert))));
  EXPECT_EQ(b.kind, load::VocabKind::kWpm);
  EXPECT_EQ(b.size(), 30522);
  EXPECT_EQ(b.pieces[7592], "\xe2\x96\x81" "hello");
  EXPECT_TRUE(b.lowercase);  // no normalizer keys: BertNormalizer's defaults
  EXPECT_TRUE(b.strip_accents);
}

}  // namespace
}  // namespace kvf
