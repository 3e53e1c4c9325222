// WordPiece (BERT): llama.cpp's bert-bge vectors exactly, and on a hand-made vocabulary the
// normalizer (controls dropped, CJK as words, accents stripped, case lowered), the punctuation
// split, longest-piece-first matching, [UNK] for words no pieces cover, and decoding.
#include <gtest/gtest.h>

#include "load/bpe_test_util.h"
#include "load/tokenizer.h"
#include "testing.h"

namespace kvf {
namespace {

using load::Tokenizer;
using load::TokenType;
using load::Vocab;
using Ids = std::vector<int32_t>;

TEST(WpmVectors, BertBgeAllPass) {
  std::optional<std::string> path = testing::model_file("llama.cpp-vocab/ggml-vocab-bert-bge.gguf");
  if (!path) KVF_SKIP_MISSING("ggml-vocab-bert-bge.gguf not present");
  Vocab v = testing::must(testing::bpe_vocab_from_gguf(*path));
  EXPECT_EQ(v.kind, load::VocabKind::kWpm);
  EXPECT_EQ(v.bos, 101);  // [CLS]
  EXPECT_EQ(v.eos, 102);  // [SEP]
  EXPECT_EQ(v.unk, 100);
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(v)));
  const testing::TokenizerVectors vec = testing::read_vectors(*path + ".inp", *path + ".out");
  ASSERT_EQ(vec.inputs.size(), vec.ids.size());
  ASSERT_GT(vec.inputs.size(), 30u);
  size_t passed = 0;
  for (size_t i = 0; i < vec.inputs.size(); ++i) {
    const Ids got = tok->encode(vec.inputs[i], false);
    EXPECT_EQ(got, vec.ids[i]) << "vector " << i << ": \"" << vec.inputs[i] << "\"";
    passed += got == vec.ids[i];
  }
  std::printf("[ vectors  ] bert-bge: %zu/%zu passed\n", passed, vec.inputs.size());
  EXPECT_EQ(tok->encode("Hello world", true), (Ids{101, 7592, 2088, 102}));
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true)), "hello world");
}

// [PAD] [UNK] [CLS] [SEP], then word starts (▁) and continuations (bare).
Vocab tiny_vocab() {
  Vocab v;
  v.kind = load::VocabKind::kWpm;
  v.pieces = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81" "play", "ing", "ed", "\xe2\x96\x81" "cafe",
              "\xe2\x96\x81" ",", "\xe2\x96\x81" "!", "\xe2\x96\x81" "\xe4\xbd\xa0", "\xe2\x96\x81" "\xe5\xa5\xbd",
              "\xe2\x96\x81" "p", "l", "a", "y", "\xe2\x96\x81" "$"};
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  for (int i : {0, 2, 3}) v.types[static_cast<size_t>(i)] = TokenType::kControl;
  v.types[1] = TokenType::kUnknown;
  v.pad = 0;
  v.unk = 1;
  v.bos = 2;
  v.eos = 3;
  v.add_bos = true;
  v.add_eos = true;
  return v;
}

std::unique_ptr<Tokenizer> tiny() { return testing::must(Tokenizer::create(tiny_vocab())); }

TEST(WpmTokenizer, LongestPieceFirstWithContinuations) {
  auto tok = tiny();
  EXPECT_EQ(tok->encode("playing played", false), (Ids{4, 5, 4, 6}));
  EXPECT_EQ(tok->encode("play", true), (Ids{2, 4, 3}));
  EXPECT_EQ(tok->encode("plya", false), (Ids{12, 13, 15, 14}));  // no "▁ply": characters
  EXPECT_EQ(tok->encode("playx", false), (Ids{1}));  // 'x' has no piece: the whole word is [UNK]
  EXPECT_EQ(tok->encode("playx play", false), (Ids{1, 4}));
  EXPECT_EQ(tok->encode("", true), (Ids{2, 3}));
}

TEST(WpmTokenizer, NormalizesLikeBert) {
  auto tok = tiny();
  EXPECT_EQ(tok->encode("PLAYING", false), (Ids{4, 5}));                       // lower case
  EXPECT_EQ(tok->encode("Caf\xc3\xa9", false), (Ids{7}));                      // é -> e (NFD, mark dropped)
  EXPECT_EQ(tok->encode("cafe\xcc\x81", false), (Ids{7}));                     // a combining accent too
  EXPECT_EQ(tok->encode("pl\x01" "ay\xe2\x80\x8b", false), (Ids{4}));          // controls and format chars dropped
  EXPECT_EQ(tok->encode("play,play!", false), (Ids{4, 8, 4, 9}));              // punctuation isolated
  EXPECT_EQ(tok->encode("play$", false), (Ids{4, 16}));                        // ASCII symbols count as punctuation
  EXPECT_EQ(tok->encode("\xe4\xbd\xa0\xe5\xa5\xbd", false), (Ids{10, 11}));    // each CJK ideograph is a word
  EXPECT_EQ(tok->encode(" \t play\xc2\xa0\xe3\x80\x80played\n", false), (Ids{4, 4, 6}));  // Unicode spaces split
  EXPECT_EQ(tok->encode("pl\xff" "ay", false), (Ids{4}));                      // invalid UTF-8 is dropped
}

TEST(WpmTokenizer, CaseAndAccentsKeptWhenTheNormalizerSaysSo) {
  Vocab v = tiny_vocab();
  v.lowercase = false;
  v.strip_accents = false;
  auto tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("PLAY", false), (Ids{1}));
  EXPECT_EQ(tok->encode("caf\xc3\xa9", false), (Ids{1}));
  EXPECT_EQ(tok->encode("playing", false), (Ids{4, 5}));
}

TEST(WpmTokenizer, OverlongWordIsUnknown) {
  auto tok = tiny();
  std::string word = "play";
  while (word.size() < 100) word += "ing";
  ASSERT_EQ(word.size(), 100u);
  EXPECT_EQ(tok->encode(word, false).size(), 33u);  // 100 characters: cut into pieces
  EXPECT_EQ(tok->encode(word + "l", false), (Ids{1}));  // 101: [UNK], though pieces would cover it
}

TEST(WpmTokenizer, DecodesWordsWithSpacesAndSkipsControls) {
  auto tok = tiny();
  EXPECT_EQ(tok->decode({2, 4, 5, 4, 6, 9, 3}), "playing played !");
  EXPECT_EQ(tok->token_bytes(5), "ing");
  EXPECT_EQ(tok->token_bytes(4), " play");
  EXPECT_EQ(tok->token_bytes(2), "");
  EXPECT_EQ(tok->token_bytes(99), "");
}

TEST(WpmTokenizer, RefusesAVocabularyWithoutUnknown) {
  Vocab v = tiny_vocab();
  v.unk = -1;
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::create(std::move(v));
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message().find("unknown token"), std::string::npos);
}

}  // namespace
}  // namespace kvf
