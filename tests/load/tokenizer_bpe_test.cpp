// Byte-level BPE: llama.cpp's GPT-2 (and MPT) vectors exactly, the GPT-2 / Llama 3 / Qwen2
// split rules on hand-derived chunks, merge order on a hand-made vocab, special tokens, exact
// round trips on any bytes, and streaming decode that never cuts a UTF-8 character.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "load/bpe_test_util.h"
#include "load/tokenizer.h"
#include "load/tokenizer_bpe.h"
#include "testing.h"

namespace kvf {
namespace {

using load::PreTokenizer;
using load::Tokenizer;
using load::TokenType;
using load::Vocab;
using Chunks = std::vector<std::string>;

std::optional<std::string> vocab_path(const std::string& name) {
  return testing::model_file("llama.cpp-vocab/ggml-vocab-" + name + ".gguf");
}

// GPT-2's vocab through load::vocab_from_gguf; nullptr when the file is absent.
std::unique_ptr<Tokenizer> gpt2_tokenizer() {
  std::optional<std::string> path = vocab_path("gpt-2");
  if (!path) return nullptr;
  return testing::must(Tokenizer::create(testing::must(testing::bpe_vocab_from_gguf(*path))));
}

// Runs every llama.cpp vector of one vocab; all must match exactly.
void check_vectors(const Tokenizer& tok, const std::string& name) {
  const std::string base = *vocab_path(name);
  const testing::TokenizerVectors v = testing::read_vectors(base + ".inp", base + ".out");
  ASSERT_GT(v.inputs.size(), 30u);
  testing::expect_vectors_pass(tok, v, name);
}

TEST(BpeVectors, Gpt2AllPass) {
  std::unique_ptr<Tokenizer> tok = gpt2_tokenizer();
  if (!tok) KVF_SKIP_MISSING("ggml-vocab-gpt-2.gguf not present");
  check_vectors(*tok, "gpt-2");
}

// MPT (GPT-NeoX's vocab): GPT-2's split, plus user-defined runs of spaces matched literally.
TEST(BpeVectors, MptAllPass) {
  std::optional<std::string> path = vocab_path("mpt");
  if (!path) KVF_SKIP_MISSING("ggml-vocab-mpt.gguf not present");
  const load::GgufFile f = testing::must(load::read_gguf(*path));
  Vocab v = testing::must(load::vocab_from_gguf(f));
  EXPECT_EQ(v.pre, PreTokenizer::kGpt2);
  check_vectors(*testing::must(Tokenizer::create(std::move(v))), "mpt");
}

// A vocab of llama.cpp's set through vocab_from_gguf, checked against its vectors; the
// pre-tokenizer its tokenizer.ggml.pre names must be `pre`.
void check_gguf_vectors(const std::string& name, PreTokenizer pre) {
  std::optional<std::string> path = vocab_path(name);
  if (!path) KVF_SKIP_MISSING("ggml-vocab-" << name << ".gguf not present");
  Vocab v = testing::must(load::vocab_from_gguf(testing::must(load::read_gguf(*path))));
  EXPECT_EQ(v.pre, pre);
  check_vectors(*testing::must(Tokenizer::create(std::move(v))), name);
}

TEST(BpeVectors, DeepseekCoderAllPass) { check_gguf_vectors("deepseek-coder", PreTokenizer::kDeepseekCoder); }
TEST(BpeVectors, DeepseekLlmAllPass) { check_gguf_vectors("deepseek-llm", PreTokenizer::kDeepseekLlm); }
TEST(BpeVectors, FalconAllPass) { check_gguf_vectors("falcon", PreTokenizer::kFalcon); }
TEST(BpeVectors, StarcoderAllPass) { check_gguf_vectors("starcoder", PreTokenizer::kStarcoder); }
TEST(BpeVectors, RefactAllPass) { check_gguf_vectors("refact", PreTokenizer::kStarcoder); }

Chunks split(PreTokenizer pre, const std::string& text) { return testing::must(load::bpe_pre_split(pre, text)); }

TEST(BpePreSplit, Gpt2) {
  const auto P = PreTokenizer::kGpt2;
  EXPECT_EQ(split(P, "Hello world"), (Chunks{"Hello", " world"}));
  EXPECT_EQ(split(P, "I'm 12345 ok!!  "), (Chunks{"I", "'m", " 12345", " ok", "!!", "  "}));
  EXPECT_EQ(split(P, "a  b"), (Chunks{"a", " ", " b"}));                  // the last space joins the word
  EXPECT_EQ(split(P, "x\n\ny"), (Chunks{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split(P, "DON'T"), (Chunks{"DON", "'", "T"}));                // contractions are lower case only
  EXPECT_EQ(split(P, "3.14"), (Chunks{"3", ".", "14"}));
  EXPECT_EQ(split(P, "\tfoo"), (Chunks{"\t", "foo"}));
  EXPECT_EQ(split(P, "你好，世界"), (Chunks{"你好", "，", "世界"}));
  EXPECT_EQ(split(P, "hi 🦙🦙 there"), (Chunks{"hi", " 🦙🦙", " there"}));
  EXPECT_EQ(split(P, "a \xc2\x85" "b"), (Chunks{"a", " ", "\xc2\x85", "b"}));  // U+0085 is whitespace
  EXPECT_EQ(split(P, ""), Chunks{});
}

TEST(BpePreSplit, Llama3) {
  const auto P = PreTokenizer::kLlama3;
  EXPECT_EQ(split(P, "I'VE 1234567 apples"), (Chunks{"I", "'VE", " ", "123", "456", "7", " apples"}));
  EXPECT_EQ(split(P, "don't we'll've"), (Chunks{"don", "'t", " we", "'ll", "'ve"}));
  EXPECT_EQ(split(P, "'sup"), (Chunks{"'s", "up"}));
  EXPECT_EQ(split(P, "Hello,world"), (Chunks{"Hello", ",world"}));      // one non-letter may lead a word
  EXPECT_EQ(split(P, "\tfoo"), (Chunks{"\tfoo"}));
  EXPECT_EQ(split(P, "a \n\n b"), (Chunks{"a", " \n\n", " b"}));
  EXPECT_EQ(split(P, "x  y"), (Chunks{"x", " ", " y"}));
  EXPECT_EQ(split(P, "ok!!\n\nnext"), (Chunks{"ok", "!!\n\n", "next"}));  // punctuation keeps its newlines
  EXPECT_EQ(split(P, "end   "), (Chunks{"end", "   "}));
  EXPECT_EQ(split(P, "3.14159"), (Chunks{"3", ".", "141", "59"}));
  EXPECT_EQ(split(P, "你好，世界 apple我"), (Chunks{"你好", "，世界", " apple我"}));
  EXPECT_EQ(split(P, "hi 🦙🦙 there"), (Chunks{"hi", " 🦙🦙", " there"}));
  // 😶 U+200D 🌫 U+FE0F: symbols, a joiner and a mark are all "not space, letter or number".
  EXPECT_EQ(split(P, "x 😶\u200d🌫\ufe0f!"), (Chunks{"x", " 😶\u200d🌫\ufe0f!"}));
}

TEST(BpePreSplit, Qwen2) {
  const auto P = PreTokenizer::kQwen2;
  EXPECT_EQ(split(P, "I'VE 1234567 apples"), (Chunks{"I", "'VE", " ", "1", "2", "3", "4", "5", "6", "7", " apples"}));
  EXPECT_EQ(split(P, "don't"), (Chunks{"don", "'t"}));
  EXPECT_EQ(split(P, "3.14"), (Chunks{"3", ".", "1", "4"}));
  EXPECT_EQ(split(P, "Hello,world"), (Chunks{"Hello", ",world"}));
  EXPECT_EQ(split(P, "a \n\n b"), (Chunks{"a", " \n\n", " b"}));
  EXPECT_EQ(split(P, "你好，世界"), (Chunks{"你好", "，世界"}));
  EXPECT_EQ(split(P, "v2 🙂"), (Chunks{"v", "2", " 🙂"}));
}

// Each later regex cuts the chunks of the ones before: digits first, then GPT-2's rule.
TEST(BpePreSplit, Starcoder) {
  const auto P = PreTokenizer::kStarcoder;
  EXPECT_EQ(split(P, "x = 123;"), (Chunks{"x", " =", " ", "1", "2", "3", ";"}));
  EXPECT_EQ(split(P, "I'm  ok"), (Chunks{"I", "'m", " ", " ok"}));
}

TEST(BpePreSplit, Falcon) {
  const auto P = PreTokenizer::kFalcon;
  // Punctuation and $+<=>^~|` runs first; then GPT-2's rule; then digits three at a time.
  EXPECT_EQ(split(P, "a+=b 12345"), (Chunks{"a", "+=", "b", " ", "123", "45"}));
  EXPECT_EQ(split(P, "12345"), (Chunks{"123", "45"}));
  EXPECT_EQ(split(P, "hi, you"), (Chunks{"hi", ",", " you"}));
}

TEST(BpePreSplit, DeepseekCoder) {
  const auto P = PreTokenizer::kDeepseekCoder;
  // '=' is a math symbol, not punctuation: it stays in the gap the digits then cut.
  EXPECT_EQ(split(P, "int x1 = 42;\n"), (Chunks{"int", " x", "1", " = ", "4", "2", ";", "\n"}));
  EXPECT_EQ(split(P, "你好 world"), (Chunks{"你好", " world"}));
}

TEST(BpePreSplit, DeepseekLlm) {
  const auto P = PreTokenizer::kDeepseekLlm;
  // The punctuation split's ":-~" range holds the ASCII letters too, so it cuts " wörld" again.
  EXPECT_EQ(split(P, "Hello, wörld 2024!"), (Chunks{"Hello", ",", " w", "ö", "rld", " ", "2024", "!"}));
  EXPECT_EQ(split(P, "ok  "), (Chunks{"ok", "  "}));  // trailing whitespace is a chunk of its own
  EXPECT_EQ(split(P, "a\r\nb"), (Chunks{"a", "\r", "\n", "b"}));
}

TEST(BpePreSplit, Deepseek3) {
  const auto P = PreTokenizer::kDeepseek3;
  EXPECT_EQ(split(P, "12345 apples"), (Chunks{"123", "45", " apples"}));
  EXPECT_EQ(split(P, "a.Hello!!"), (Chunks{"a", ".Hello", "!!"}));
  EXPECT_EQ(split(P, "日本語です"), (Chunks{"日本語です"}));
}

TEST(BpePreSplit, Bloom) {
  const auto P = PreTokenizer::kBloom;
  EXPECT_EQ(split(P, "Hello, world!"), (Chunks{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split(P, "f(x)|y"), (Chunks{"f", "(", "x", ")|", "y"}));  // its class leaves out ( | ) too: gaps
  EXPECT_EQ(split(P, "a  b\u3002c"), (Chunks{"a", " ", " b", "\u3002", "c"}));
}

TEST(BpePreSplit, GgufNamesRoundTrip) {
  for (PreTokenizer p : load::all_pre_tokenizers()) {
    EXPECT_EQ(load::pre_tokenizer_named(load::pre_tokenizer_name(p)), p) << load::pre_tokenizer_name(p);
    EXPECT_FALSE(load::bpe_split_regexes(p).empty());
  }
  EXPECT_EQ(load::pre_tokenizer_named("mpt"), PreTokenizer::kGpt2);
  EXPECT_EQ(load::pre_tokenizer_named("no-such-split"), std::nullopt);
}

TEST(BpePreSplit, InvalidUtf8BytesAreTheirOwnChunks) {
  for (PreTokenizer p : load::all_pre_tokenizers()) {
    EXPECT_EQ(split(p, "ab\xff" "cd"), (Chunks{"ab", "\xff", "cd"}));
    EXPECT_EQ(split(p, "\xe4\xbd"), (Chunks{"\xe4\xbd"}));  // a truncated character
  }
}

TEST(BpeAlphabet, BytesMapToPrintableCharactersAndBack) {
  EXPECT_EQ(load::bytes_to_bpe_unicode(" "), "Ġ");
  EXPECT_EQ(load::bytes_to_bpe_unicode("\n"), "Ċ");
  EXPECT_EQ(load::bytes_to_bpe_unicode("a!~"), "a!~");
  EXPECT_EQ(load::bytes_to_bpe_unicode("\xc3\xa9"), "Ã©");  // é's two bytes
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(load::bpe_unicode_to_bytes(load::bytes_to_bpe_unicode(all)), all);
  std::set<std::string> distinct;
  for (int b = 0; b < 256; ++b) distinct.insert(load::bytes_to_bpe_unicode(std::string(1, static_cast<char>(b))));
  EXPECT_EQ(distinct.size(), 256u);
  EXPECT_EQ(load::bpe_unicode_to_bytes("x y"), "x y");  // a plain space is not in the alphabet: kept
}

// A hand-made vocab: bytes a b c Ġ, merges in rank order "a b" < "b c" < "ab c" < "Ġ a" < "a a".
Vocab small_vocab() {
  Vocab v;
  v.kind = load::VocabKind::kBpe;
  v.pieces = {"a", "b", "c", "Ġ", "ab", "bc", "abc", "Ġa", "<|end|>", "<unk>", "aa", "<x>"};
  v.types.assign(v.pieces.size(), TokenType::kNormal);
  v.types[8] = TokenType::kControl;
  v.types[9] = TokenType::kUnknown;
  v.types[11] = TokenType::kUserDefined;
  v.merges = {"a b", "b c", "ab c", "Ġ a", "a a"};
  v.add_bos = false;
  v.eos = 8;
  return v;
}

TEST(BpeTokenizer, MergesByRankOnAHandMadeVocab) {
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(small_vocab()));
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{6}));     // a b -> ab, then ab c
  EXPECT_EQ(tok->encode("bcab", false), (std::vector<int32_t>{5, 4}));  // "a b" (rank 0) before "b c"
  EXPECT_EQ(tok->encode(" ab", false), (std::vector<int32_t>{3, 4}));   // "a b" beats "Ġ a"; no "Ġ ab"
  EXPECT_EQ(tok->encode(" a", false), (std::vector<int32_t>{7}));
  EXPECT_EQ(tok->encode("abab", false), (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(tok->encode("aaa", false), (std::vector<int32_t>{10, 0}));  // leftmost first on a tie
  EXPECT_EQ(tok->encode("abc<|end|>ab<x>", false), (std::vector<int32_t>{6, 8, 4, 11}));
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{4}));  // add_eos is off
  EXPECT_EQ(tok->encode("", false), std::vector<int32_t>{});
  EXPECT_EQ(tok->decode({6, 8, 3, 4, 11}), "abc ab<x>");  // control tokens decode to nothing
  EXPECT_EQ(tok->token_bytes(3), " ");
  EXPECT_EQ(tok->token_bytes(99), "");
}

TEST(BpeTokenizer, BytesMissingFromTheVocabGiveUnk) {
  Vocab v = small_vocab();
  v.unk = 9;
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("az", false), (std::vector<int32_t>{0, 9}));
}

TEST(BpeTokenizer, AddSpecialUsesBosAndEos) {
  Vocab v = small_vocab();
  v.bos = 11;
  v.add_bos = true;
  v.add_eos = true;
  std::unique_ptr<Tokenizer> tok = testing::must(Tokenizer::create(std::move(v)));
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{11, 4, 8}));
  EXPECT_EQ(tok->encode("ab", false), (std::vector<int32_t>{4}));
}

TEST(BpeTokenizer, BadMergesAreTypedErrors) {
  Vocab v = small_vocab();
  v.merges.push_back("abc");
  Result<std::unique_ptr<Tokenizer>> r = Tokenizer::create(v);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.error().message().find("merge 5"), std::string::npos) << r.error().message();
  v.merges.back() = "c c";  // "cc" is not a piece
  Result<std::unique_ptr<Tokenizer>> r2 = Tokenizer::create(v);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message().find("\"cc\" is not in the vocabulary"), std::string::npos) << r2.error().message();
  v.merges.pop_back();
  v.types.pop_back();
  Result<std::unique_ptr<Tokenizer>> r3 = Tokenizer::create(v);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInvalidInput);
}

TEST(BpeTokenizer, Gpt2SpecialTokenInTextIsOneToken) {
  std::unique_ptr<Tokenizer> tok = gpt2_tokenizer();
  if (!tok) KVF_SKIP_MISSING("gpt-2 vocab not present");
  // " Hello" = 18435 and " world" = 995 (llama.cpp's vectors); <|endoftext|> = 50256.
  EXPECT_EQ(tok->encode(" Hello<|endoftext|> world", false), (std::vector<int32_t>{18435, 50256, 995}));
  EXPECT_EQ(tok->decode({18435, 50256, 995}), " Hello world");
}

// Text from a pool of awkward characters: controls, spaces, CJK, emoji, marks, U+0085, NBSP.
std::string random_text(std::mt19937_64& rng, bool raw_bytes) {
  static const std::vector<std::string> pool = {
      "a", "Z", "é", "0", "7", " ", "  ", "\t", "\n", "\r\n", "\x01", "\x1b", "\x7f", "'s", "'LL", "!", "...",
      "你", "好", "世界", "🦙", "😀", "👨‍👩‍👧", "\u200d", "\ufe0f", "\u0301",
      "\xc2\x85", "\xc2\xa0", "ß", "Ω", "١٢٣",
      "<|endoftext", "ﬀ", "\U0001F600\U0001F601"};
  std::string s;
  const size_t n = rng() % 40;
  for (size_t i = 0; i < n; ++i) {
    if (raw_bytes && rng() % 4 == 0) s += static_cast<char>(rng() % 256);
    else s += pool[rng() % pool.size()];
  }
  return s;
}

TEST(BpeRoundTrip, AnyTextDecodesToItself) {
  std::unique_ptr<Tokenizer> tok = gpt2_tokenizer();
  if (!tok) KVF_SKIP_MISSING("gpt-2 vocab not present");
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  // Built by append: GCC 12 at -O2 reports a false -Warray-bounds on a chain of string +.
  std::string spaces_x_newlines(5000, ' ');
  spaces_x_newlines.append("x").append(3000, '\n');
  const std::vector<std::string> fixed = {"Hello, y'all! 🦙 你好世界 \t\n\r\x01\x7f  end  ", "\xff\xfe bytes \xe4\xbd",
                                          spaces_x_newlines, std::string(20000, 'a'), std::string(3000, '7')};
  for (const std::string& s : fixed) EXPECT_EQ(tok->decode(tok->encode(s, false)), s);
  for (int i = 0; i < 400; ++i) {
    const std::string s = random_text(rng, /*raw_bytes=*/i % 2 == 1);
    ASSERT_EQ(tok->decode(tok->encode(s, false)), s) << "seed " << seed << " case " << i;
  }
}

// True when s ends inside a UTF-8 character (a lead byte whose continuation bytes are missing).
bool ends_mid_character(const std::string& s) {
  size_t k = 0;  // continuation bytes at the end
  while (k < s.size() && k < 4 && (static_cast<unsigned char>(s[s.size() - 1 - k]) & 0xC0) == 0x80) ++k;
  if (k == s.size()) return false;
  const auto lead = static_cast<unsigned char>(s[s.size() - 1 - k]);
  const size_t want = lead >= 0xF0 && lead <= 0xF4 ? 3 : lead >= 0xE0 && lead <= 0xEF ? 2 : lead >= 0xC2 && lead <= 0xDF ? 1 : 0;
  return want > k;
}

TEST(BpeStreamDecoder, ChunksAreWholeCharactersAndConcatenateToDecode) {
  std::unique_ptr<Tokenizer> tok = gpt2_tokenizer();
  if (!tok) KVF_SKIP_MISSING("gpt-2 vocab not present");
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  std::vector<std::string> texts = {"🦙🦙 ខ្មែរ 你好 Ω é \x01 ok", "👨‍👩‍👧 family"};
  for (int i = 0; i < 200; ++i) texts.push_back(random_text(rng, false));
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->encode(text, false);
    load::StreamDecoder dec(*tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = dec.push(id);
      EXPECT_FALSE(ends_mid_character(chunk)) << "seed " << seed;
      streamed += chunk;
    }
    EXPECT_EQ(dec.flush(), "");  // valid UTF-8 in, so nothing is left held back
    EXPECT_EQ(streamed, tok->decode(ids)) << "seed " << seed;
    EXPECT_EQ(streamed, text);
  }
  // A llama emoji is three GPT-2 tokens (llama.cpp's vector: " 🦙" = 12520 99 247): held until whole.
  load::StreamDecoder dec(*tok);
  EXPECT_EQ(dec.push(12520), " ");
  EXPECT_EQ(dec.push(99), "");
  EXPECT_EQ(dec.push(247), "🦙");
}

}  // namespace
}  // namespace kvf
