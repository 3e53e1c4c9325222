// llama2.c tokenizer.bin reader: the real stories260K and Llama 2 files, and malformed
// hand-built files (every truncation, bad lengths, NaN scores) that must give typed errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "load/vocab_readers.h"
#include "testing.h"

namespace kvf {
namespace {

using load::TokenType;
using load::Vocab;

// A llama2.c tokenizer.bin from (score, piece) records.
std::vector<uint8_t> build(int32_t max_len, const std::vector<std::pair<float, std::string>>& records) {
  std::vector<uint8_t> b;
  auto put = [&](const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  };
  put(&max_len, 4);
  for (const auto& [score, piece] : records) {
    const auto len = static_cast<int32_t>(piece.size());
    put(&score, 4);
    put(&len, 4);
    put(piece.data(), piece.size());
  }
  return b;
}

const std::vector<std::pair<float, std::string>> kSmall = {
    {0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}, {0, "<0x0A>"}, {-1, " a"}, {-2, "bc"}};

void expect_invalid(const std::vector<uint8_t>& bytes, int32_t vocab_size, const std::string& needle) {
  Result<Vocab> v = load::parse_llama2c_vocab(bytes, vocab_size, "bad.bin");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(v.error().message().find("bad.bin"), std::string::npos) << v.error().message();
  EXPECT_NE(v.error().message().find(needle), std::string::npos) << v.error().message();
}

TEST(Llama2cVocab, ParsesHandBuiltFile) {
  const std::vector<uint8_t> b = build(6, kSmall);
  Vocab v = testing::must(load::parse_llama2c_vocab(b, 6, "small.bin"));
  EXPECT_EQ(v.kind, load::VocabKind::kSpm);
  ASSERT_EQ(v.size(), 6);
  EXPECT_EQ(v.pieces[1], "\n<s>\n");
  EXPECT_EQ(v.pieces[4], " a");
  EXPECT_EQ(v.scores[5], -2.0f);
  EXPECT_EQ(v.types[0], TokenType::kUnknown);
  EXPECT_EQ(v.types[1], TokenType::kControl);
  EXPECT_EQ(v.types[2], TokenType::kControl);
  EXPECT_EQ(v.types[3], TokenType::kByte);
  EXPECT_EQ(v.types[4], TokenType::kNormal);
  EXPECT_EQ(v.space, " ");
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.unk, 0);
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
}

TEST(Llama2cVocab, EveryTruncationIsATypedError) {
  const std::vector<uint8_t> b = build(6, kSmall);
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    Result<Vocab> v = load::parse_llama2c_vocab(cut, 6, "cut.bin");
    ASSERT_FALSE(v.ok()) << "accepted a file cut at " << n;
    EXPECT_EQ(v.error().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(v.error().message().find("cut.bin: at byte offset"), std::string::npos) << v.error().message();
    EXPECT_NE(v.error().message().find("truncated"), std::string::npos) << v.error().message();
  }
}

TEST(Llama2cVocab, BadLengthsScoresAndSizes) {
  const std::vector<uint8_t> b = build(6, kSmall);
  // Record 0 starts at 4: score at 4, length at 8.
  expect_invalid(testing::poke(b, 8, int32_t{0x7fffffff}), 6, "at byte offset 8: length 2147483647");
  expect_invalid(testing::poke(b, 8, int32_t{-1}), 6, "length -1 of token 0");
  expect_invalid(testing::poke(b, 8, int32_t{7}), 6, "outside 0..max_token_length 6");
  expect_invalid(testing::poke(b, 4, std::nanf("")), 6, "at byte offset 4: score of token 0");
  expect_invalid(testing::poke(b, 4, INFINITY), 6, "score of token 0");
  expect_invalid(testing::poke(b, 0, int32_t{0}), 6, "max_token_length 0");
  expect_invalid(b, 0, "vocab_size 0");
  expect_invalid(b, -3, "vocab_size -3");
  expect_invalid(b, 5, "bytes follow the 5 tokens");
  expect_invalid(b, 7, "truncated");
  expect_invalid(b, 0x7fffffff, "truncated");  // a huge vocab_size must not allocate for it
}

TEST(Llama2cVocab, MissingFileIsAnError) {
  Result<Vocab> v = load::read_llama2c_vocab("/nonexistent/tokenizer.bin", 32000);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message().find("/nonexistent/tokenizer.bin"), std::string::npos);
}

TEST(Llama2cVocab, ReadsStories260KTok512) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  Vocab v = testing::must(load::read_llama2c_vocab(*path, 512));
  // Facts from SOURCES.md.
  ASSERT_EQ(v.size(), 512);
  EXPECT_EQ(v.pieces[0], "<unk>");
  EXPECT_EQ(v.pieces[1], "\n<s>\n");
  EXPECT_EQ(v.pieces[2], "\n</s>\n");
  EXPECT_EQ(v.pieces[3], "<0x00>");
  EXPECT_EQ(v.pieces[258], "<0xFF>");
  EXPECT_EQ(v.pieces[259], " t");
  EXPECT_EQ(v.pieces[317], " Lily");
  for (int i = 3; i <= 258; ++i) EXPECT_EQ(v.types[static_cast<size_t>(i)], TokenType::kByte) << i;
  for (int i = 259; i < 512; ++i) EXPECT_EQ(v.types[static_cast<size_t>(i)], TokenType::kNormal) << i;
  EXPECT_EQ(v.scores[260], -1.0f);
  EXPECT_EQ(v.scores[261], -2.0f);
  // The same file is not a 513- or 511-token vocabulary.
  EXPECT_FALSE(load::read_llama2c_vocab(*path, 513).ok());
  EXPECT_FALSE(load::read_llama2c_vocab(*path, 511).ok());
}

TEST(Llama2cVocab, ReadsLlama2Tokenizer) {
  std::optional<std::string> path = testing::model_file("llama2-tokenizer/tokenizer.bin");
  if (!path) KVF_SKIP_MISSING("llama2 tokenizer.bin not present");
  Vocab v = testing::must(load::read_llama2c_vocab(*path, 32000));
  ASSERT_EQ(v.size(), 32000);
  EXPECT_EQ(v.pieces[29871], " ");
  EXPECT_EQ(v.pieces[15043], " Hello");
  EXPECT_EQ(v.types[3 + 0x0A], TokenType::kByte);
}

}  // namespace
}  // namespace kvf
