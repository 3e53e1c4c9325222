// SentencePiece-style tokenizer: peer-produced ids (REFERENCE.md, llama.cpp's test-tokenizer-0
// vectors), exact round trips on awkward UTF-8, UTF-8-safe streaming, and the merge rules on
// small hand-built vocabularies.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "load/gguf.h"
#include "load/bpe_test_util.h"
#include "load/tokenizer.h"
#include "load/vocab_readers.h"
#include "testing.h"

namespace kvf {
namespace {

using load::StreamDecoder;
using load::Tokenizer;
using load::TokenType;
using load::Vocab;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> llama2c_tokenizer(const std::string& path, int32_t vocab_size) {
  return testing::must(Tokenizer::create(testing::must(load::read_llama2c_vocab(path, vocab_size))));
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const std::string& path) {
  load::GgufFile f = testing::must(load::read_gguf(path));
  return testing::must(Tokenizer::create(testing::must(load::vocab_from_gguf(f))));
}

// Text that exercises the byte fallback, multi-byte merges and whitespace handling.
const std::vector<std::string> kAwkward = {
    "Once upon a time",
    " leading space",
    "trailing space ",
    "  two leading, three   inner, two trailing  ",
    " ",
    "   ",
    "\n",
    "line one\nline two\n\n  indented\ttab\r\n",
    "emoji: 🦙 😁🚀 and a family 👨‍👩‍👧",
    "我想在apple工作 1314151 天～",
    "combining: e\xCC\x81 a\xCC\x8A\xCC\x81 n\xCC\x83",  // e + acute, a + ring + acute, n + tilde
    "нещо на Български",
    "កាន់តែពិសេសអាច Cửa Việt",
    "<s> and </s> and <0x0A> typed as text",
    "\xE2\x96\x81 a literal lower one eighth block",
    "x",
};

void expect_round_trips(const Tokenizer& tok, const std::string& which) {
  for (const std::string& s : kAwkward) {
    if (tok.vocab().space == "\xe2\x96\x81" && s.find("\xe2\x96\x81") != std::string::npos) continue;  // see below
    EXPECT_EQ(tok.decode(tok.encode(s, false)), s) << which << ": " << s;
    EXPECT_EQ(tok.decode(tok.encode(s, true)), s) << which << " with BOS: " << s;
  }
}

// With valid_utf8, also checks that no chunk ends inside a character.
void expect_stream_matches_decode(const Tokenizer& tok, const Ids& ids, bool valid_utf8 = true) {
  StreamDecoder stream(tok);
  std::string joined;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    if (valid_utf8 && !chunk.empty()) {  // the last lead byte's sequence is whole
      size_t lead = chunk.size() - 1;
      while (lead > 0 && (static_cast<unsigned char>(chunk[lead]) & 0xC0) == 0x80) --lead;
      const auto c = static_cast<unsigned char>(chunk[lead]);
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      EXPECT_EQ(chunk.size() - lead, need) << "chunk ends in a partial UTF-8 sequence";
    }
    joined += chunk;
  }
  joined += stream.flush();
  EXPECT_EQ(joined, tok.decode(ids));
}

// --- stories260K tok512 (llama2.c format) -----------------------------------------------

TEST(SpmTok512, EncodesReferencePrompt) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  EXPECT_EQ(tok->encode("Once upon a time", true), (Ids{1, 403, 407, 261, 378}));  // REFERENCE.md
  EXPECT_EQ(tok->encode("Once upon a time", false), (Ids{403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->encode("", false), Ids{});
}

TEST(SpmTok512, DecodesReferenceContinuation) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  // REFERENCE.md: llama.cpp's first 64 greedy ids after "Once upon a time", and their text.
  const Ids gen = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
                   410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394,
                   261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432,
                   398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310, 439, 419, 357, 336};
  const std::string text =
      ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red "
      "ball. She wanted to play with it, but it was too high.\nLily's mom said";
  EXPECT_EQ(tok->decode(gen), text);
  Ids all = {1, 403, 407, 261, 378};
  all.insert(all.end(), gen.begin(), gen.end());
  EXPECT_EQ(tok->decode(all), "Once upon a time" + text);
  expect_stream_matches_decode(*tok, all);
}

TEST(SpmTok512, RoundTripsAwkwardText) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  expect_round_trips(*tok, "tok512");
  // llama2.c spaces are plain ' ', so even a literal '▁' round-trips here.
  const std::string block = "\xE2\x96\x81 x";
  EXPECT_EQ(tok->decode(tok->encode(block, false)), block);
}

TEST(SpmTok512, EmojiBecomesByteTokensAndStreamsWhole) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  // U+1F999 is F0 9F A6 99; byte tokens are ids 3 + byte.
  const Ids ids = tok->encode("a\xF0\x9F\xA6\x99", false);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(Ids(ids.end() - 4, ids.end()), (Ids{3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}));
  for (const std::string& s : kAwkward) expect_stream_matches_decode(*tok, tok->encode(s, true));
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.push(3 + 0xF0), "");
  EXPECT_EQ(stream.push(3 + 0x9F), "");
  EXPECT_EQ(stream.push(3 + 0xA6), "");
  EXPECT_EQ(stream.push(3 + 0x99), "\xF0\x9F\xA6\x99");
}

TEST(SpmTok512, TextNeverBecomesControlOrByteTokens) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  const Ids ids = tok->encode("\n<s>\n <0x41> <unk>", false);
  for (int32_t id : ids) EXPECT_GT(id, 2);
  for (int32_t id : ids) EXPECT_NE(id, 3 + 0x41);
}

// Random strings mixing ASCII, spaces, multi-byte characters and stray bytes.
TEST(SpmTok512, RandomTextRoundTrips) {
  std::optional<std::string> path = testing::model_file("stories260K/tok512.bin");
  if (!path) KVF_SKIP_MISSING("tok512.bin not present");
  auto tok = llama2c_tokenizer(*path, 512);
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  const std::vector<std::string> atoms = {"a", "e", "th", " ", "  ", "\n", "\t", "Lily", ".", "\xC3\xA9",
                                          "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\xCC\x81", "\xFF", "\x80", "\xE2\x82"};
  for (int i = 0; i < 300; ++i) {
    std::string s;
    const size_t n = rng() % 24;
    for (size_t k = 0; k < n; ++k) s += atoms[rng() % atoms.size()];
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s) << "seed " << seed;
    expect_stream_matches_decode(*tok, tok->encode(s, true), false);
  }
}

// The same vocabulary converted to GGUF by llama.cpp ('▁' spaces) encodes identically.
TEST(SpmTok512, MatchesItsGgufConversion) {
  std::optional<std::string> bin = testing::model_file("stories260K/tok512.bin");
  std::optional<std::string> gguf = testing::model_file("stories260K/stories260K.gguf");
  if (!bin || !gguf) KVF_SKIP_MISSING("stories260K files not present");
  auto a = llama2c_tokenizer(*bin, 512);
  auto b = gguf_tokenizer(*gguf);
  for (const std::string& s : kAwkward) {
    if (s.find("\xE2\x96\x81") != std::string::npos) continue;  // '▁' is text here, a space there
    EXPECT_EQ(a->encode(s, true), b->encode(s, true)) << s;
  }
}

// --- Llama 2 vocabulary --------------------------------------------------------------------

TEST(SpmLlama2, TokenizerBinEncodesSentences) {
  std::optional<std::string> path = testing::model_file("llama2-tokenizer/tokenizer.bin");
  if (!path) KVF_SKIP_MISSING("llama2 tokenizer.bin not present");
  auto tok = llama2c_tokenizer(*path, 32000);
  // Ids from llama.cpp's Llama 2 vectors (ggml-vocab-llama-spm.gguf.out).
  EXPECT_EQ(tok->encode("Hello world", true), (Ids{1, 15043, 3186}));
  EXPECT_EQ(tok->encode(" Hello, world!", false), (Ids{29871, 15043, 29892, 3186, 29991}));
  EXPECT_EQ(tok->encode("    Hello\n    Hello", false), (Ids{268, 15043, 13, 1678, 15043}));
  const std::string s = "The quick brown fox jumps over the lazy dog.";
  const Ids ids = tok->encode(s, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_LT(ids.size(), 14u);  // word-sized pieces, not characters
  EXPECT_EQ(tok->decode(ids), s);
  expect_round_trips(*tok, "llama2 tokenizer.bin");
}

void expect_vectors(const std::string& vocab_name, size_t expected_count) {
  const std::string dir = "llama.cpp-vocab/";
  std::optional<std::string> gguf = testing::model_file(dir + vocab_name);
  std::optional<std::string> inp = testing::model_file(dir + vocab_name + ".inp");
  std::optional<std::string> out = testing::model_file(dir + vocab_name + ".out");
  if (!gguf || !inp || !out) KVF_SKIP_MISSING(vocab_name << " or its vectors not present");
  auto tok = gguf_tokenizer(*gguf);
  const testing::TokenizerVectors v = testing::read_vectors(*inp, *out);
  ASSERT_EQ(v.inputs.size(), expected_count);
  testing::expect_vectors_pass(*tok, v, vocab_name);
}

TEST(SpmLlamaVocab, MatchesLlamaCppVectors) { expect_vectors("ggml-vocab-llama-spm.gguf", 46); }

TEST(SpmLlamaVocab, MatchesLlamaCppVectorsPhi3) { expect_vectors("ggml-vocab-phi-3.gguf", 46); }

TEST(SpmLlamaVocab, TokenizerBinAgreesWithGguf) {
  std::optional<std::string> bin = testing::model_file("llama2-tokenizer/tokenizer.bin");
  std::optional<std::string> gguf = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  std::optional<std::string> inp = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf.inp");
  std::optional<std::string> out = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf.out");
  if (!bin || !gguf || !inp || !out) KVF_SKIP_MISSING("Llama 2 vocab files not present");
  auto a = llama2c_tokenizer(*bin, 32000);
  auto b = gguf_tokenizer(*gguf);
  const testing::TokenizerVectors v = testing::read_vectors(*inp, *out);
  ASSERT_EQ(v.ids.size(), v.inputs.size());
  for (size_t i = 0; i < v.inputs.size(); ++i) EXPECT_EQ(a->encode(v.inputs[i], false), v.ids[i]) << v.inputs[i];
  for (const std::string& s : kAwkward) {
    if (s.find("\xE2\x96\x81") != std::string::npos) continue;  // '▁' is text here, a space there
    EXPECT_EQ(a->encode(s, true), b->encode(s, true)) << s;
  }
}

TEST(SpmLlamaVocab, RoundTripsAndStreams) {
  std::optional<std::string> path = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  if (!path) KVF_SKIP_MISSING("ggml-vocab-llama-spm.gguf not present");
  auto tok = gguf_tokenizer(*path);
  EXPECT_EQ(tok->vocab().bos, 1);
  EXPECT_TRUE(tok->vocab().add_bos);
  EXPECT_EQ(tok->encode("Hello world", true), (Ids{1, 15043, 3186}));
  expect_round_trips(*tok, "llama-spm");
  for (const std::string& s : kAwkward) expect_stream_matches_decode(*tok, tok->encode(s, true));
  // A literal '▁' is the space symbol itself, so SentencePiece decodes it as ' ' (inherent).
  EXPECT_EQ(tok->decode(tok->encode("a\xE2\x96\x81z", false)), "a z");
  // Decoding: BOS/EOS give nothing, <unk> its piece, byte tokens their byte.
  EXPECT_EQ(tok->token_bytes(1), "");
  EXPECT_EQ(tok->token_bytes(2), "");
  EXPECT_EQ(tok->token_bytes(3 + 'A'), "A");
  EXPECT_EQ(tok->token_bytes(15043), " Hello");
  EXPECT_EQ(tok->token_bytes(-1), "");
  EXPECT_EQ(tok->token_bytes(32000), "");
}

TEST(SpmLlamaVocab, BaichuanLoadsAndRoundTrips) {
  std::optional<std::string> path = testing::model_file("llama.cpp-vocab/ggml-vocab-baichuan.gguf");
  if (!path) KVF_SKIP_MISSING("ggml-vocab-baichuan.gguf not present");
  auto tok = gguf_tokenizer(*path);
  EXPECT_EQ(tok->vocab().size(), 64000);
  expect_round_trips(*tok, "baichuan");
}

// --- hand-built vocabularies: the merge rules themselves ----------------------------------

Vocab tiny_vocab(std::vector<std::pair<std::string, float>> pieces, bool bytes) {
  Vocab v;
  v.space = "_";
  v.add_space_prefix = false;
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.scores = {0, 0, 0};
  v.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  for (int b = 0; bytes && b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.pieces.push_back(name);
    v.scores.push_back(0);
    v.types.push_back(TokenType::kByte);
  }
  for (auto& [p, s] : pieces) {
    v.pieces.push_back(p);
    v.scores.push_back(s);
    v.types.push_back(TokenType::kNormal);
  }
  return v;
}

int32_t id_of(const Tokenizer& tok, const std::string& piece) {
  for (int32_t i = 0; i < tok.vocab().size(); ++i) {
    if (tok.vocab().pieces[static_cast<size_t>(i)] == piece) return i;
  }
  return -1;
}

TEST(SpmRules, HighestScoreMergesFirstTiesGoLeft) {
  // "abc": bc (score 2) outranks ab (score 1) even though ab is further left.
  auto tok = testing::must(Tokenizer::create(tiny_vocab({{"a", 0}, {"b", 0}, {"c", 0}, {"ab", 1}, {"bc", 2}}, true)));
  EXPECT_EQ(tok->encode("abc", false), (Ids{id_of(*tok, "a"), id_of(*tok, "bc")}));
  // Equal scores: the leftmost pair merges first, so "aaa" -> aa + a.
  auto tie = testing::must(Tokenizer::create(tiny_vocab({{"a", 0}, {"aa", 1}}, true)));
  EXPECT_EQ(tie->encode("aaa", false), (Ids{id_of(*tie, "aa"), id_of(*tie, "a")}));
  // A merge target that needs an unreachable intermediate is never built: "abc" has no "ab"/"bc".
  auto gap = testing::must(Tokenizer::create(tiny_vocab({{"a", 0}, {"b", 0}, {"c", 0}, {"abc", 9}}, true)));
  EXPECT_EQ(gap->encode("abc", false), (Ids{id_of(*gap, "a"), id_of(*gap, "b"), id_of(*gap, "c")}));
}

TEST(SpmRules, SpacesDummyPrefixAndSpecials) {
  Vocab v = tiny_vocab({{"_", 0}, {"a", 0}, {"_a", 1}}, true);
  v.add_space_prefix = true;
  v.add_eos = true;
  auto tok = testing::must(Tokenizer::create(std::move(v)));
  const int32_t ua = id_of(*tok, "_a"), u = id_of(*tok, "_");
  EXPECT_EQ(tok->encode("a a", true), (Ids{1, ua, ua, 2}));
  EXPECT_EQ(tok->encode(" a", false), (Ids{u, ua}));
  EXPECT_EQ(tok->decode({1, ua, ua, 2}), "a a");
  EXPECT_EQ(tok->decode({u, ua}), " a");
}

TEST(SpmRules, UnknownWithoutByteTokens) {
  auto tok = testing::must(Tokenizer::create(tiny_vocab({{"a", 0}}, false)));
  EXPECT_EQ(tok->encode("a\xC3\xA9" "a", false), (Ids{3, 0, 3}));  // one <unk> per unknown character
  Vocab no_unk = tiny_vocab({{"a", 0}}, false);
  no_unk.unk = -1;
  Result<std::unique_ptr<Tokenizer>> r = Tokenizer::create(std::move(no_unk));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
}

TEST(SpmRules, UserDefinedPiecesMatchWhole) {
  Vocab v = tiny_vocab({{"a", 0}, {"b", 0}, {"ab", 5}}, true);
  v.pieces.push_back("b<x>");
  v.scores.push_back(0);
  v.types.push_back(TokenType::kUserDefined);
  auto tok = testing::must(Tokenizer::create(std::move(v)));
  const int32_t ud = tok->vocab().size() - 1;
  EXPECT_EQ(tok->encode("ab<x>a", false), (Ids{id_of(*tok, "a"), ud, id_of(*tok, "a")}));
  EXPECT_EQ(tok->decode(tok->encode("ab<x>a", false)), "ab<x>a");
}

TEST(SpmRules, UntypedByteNamedPiecesAreByteTokens) {
  Vocab v = tiny_vocab({{"a", 0}, {"<", 0}, {"0", 0}, {"<0", 3}}, true);
  for (TokenType& t : v.types) t = TokenType::kNormal;  // e.g. a GGUF without token types
  auto tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("\xC3\xA9", false), (Ids{3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->token_bytes(3 + 0xC3), "\xC3");
  const Ids ids = tok->encode("<0x41>", false);  // typed text stays text
  EXPECT_EQ(ids.front(), id_of(*tok, "<0"));
  EXPECT_EQ(tok->decode(ids), "<0x41>");
}

TEST(SpmRules, MalformedVocabsAreTypedErrors) {
  Vocab v = tiny_vocab({{"a", 0}}, true);
  v.scores.pop_back();
  Result<std::unique_ptr<Tokenizer>> r1 = Tokenizer::create(std::move(v));
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code(), ErrorCode::kInvalidInput);
  Vocab nan = tiny_vocab({{"a", std::nanf("")}}, true);
  Result<std::unique_ptr<Tokenizer>> r2 = Tokenizer::create(std::move(nan));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code(), ErrorCode::kInvalidInput);
  Vocab types = tiny_vocab({{"a", 0}}, true);
  types.types.clear();
  Result<std::unique_ptr<Tokenizer>> r3 = Tokenizer::create(std::move(types));
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInvalidInput);
}

TEST(SpmRules, MalformedUtf8RoundTrips) {
  auto tok = testing::must(Tokenizer::create(tiny_vocab({{"a", 0}, {"\xC3\xA9", 0}}, true)));
  const std::string bad = "a\xC3" "a\xFF\x80\xE2\x82";  // truncated, stray, truncated at end
  EXPECT_EQ(tok->decode(tok->encode(bad, false)), bad);
  expect_stream_matches_decode(*tok, tok->encode(bad, false), false);
}

}  // namespace
}  // namespace kvf
