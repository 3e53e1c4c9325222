// Tokenizers: a Vocab read from a checkpoint (llama2.c tokenizer.bin, GGUF tokenizer.ggml.*,
// HF tokenizer.json) and the Tokenizer that encodes text to ids and decodes ids back.
// Three algorithms: SentencePiece-style BPE by piece score with byte fallback (tokenizer_spm.cpp),
// byte-level BPE by merge rank with a pre-tokenizer (tokenizer_bpe.cpp) and BERT's WordPiece,
// longest piece first (tokenizer_wpm.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace kvf::load {

// llama.cpp's token types (GGUF tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

enum class VocabKind {
  kSpm,  // SentencePiece BPE: merges chosen by piece score, byte fallback <0xNN>
  kBpe,  // byte-level BPE (GPT-2 family): merges chosen by rank, bytes mapped to unicode
  kWpm,  // WordPiece (BERT): normalized words cut into the longest pieces, '▁' starts a word
};

// The pre-tokenizer split rules byte-level BPE applies before merging (tokenizer_bpe.h has
// each one's regexes and GGUF name).
enum class PreTokenizer { kGpt2, kLlama3, kQwen2, kDeepseekLlm, kDeepseekCoder, kDeepseek3, kFalcon, kStarcoder, kBloom };

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::vector<std::string> pieces;  // id -> piece as stored (SPM: '▁' or ' ' for space)
  std::vector<float> scores;        // SPM merge priority (higher first)
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // BPE: "a b" in rank order
  PreTokenizer pre = PreTokenizer::kGpt2;
  std::string space = "\xe2\x96\x81";  // SPM's space symbol: '▁', or " " for llama2.c files
  bool add_space_prefix = true;        // SPM: prepend a space to the text (dummy prefix)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool lowercase = true;      // WordPiece: BERT's normalizer lowers case ...
  bool strip_accents = true;  // ... and drops accents (NFD, then no nonspacing marks)

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
};

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab);
  virtual ~Tokenizer() = default;

  const Vocab& vocab() const { return vocab_; }
  // Text (UTF-8) to ids; with add_special, BOS (and EOS) as the vocab asks.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special) const = 0;
  // The bytes one token stands for (control tokens give "", byte tokens their byte).
  virtual std::string token_bytes(int32_t id) const = 0;
  // Ids back to text; invalid UTF-8 is kept as bytes. SPM vocabs with a dummy prefix and
  // WordPiece drop one leading ' ' from the first token that yields text, so decode(encode(t))
  // == t (for WordPiece, up to its normalization and the spaces around punctuation).
  std::string decode(const std::vector<int32_t>& ids) const;

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  Vocab vocab_;
};

// Streams decoded text: feed ids one by one; each call returns only whole UTF-8 characters,
// holding back a trailing partial sequence until its remaining bytes arrive. The chunks
// concatenate to decode(ids); to stream a continuation, push the prompt's ids first.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);
  std::string flush();  // whatever is held back, as is

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool at_start_ = true;  // no token has yielded text yet (see decode)
};

// The three algorithms; Tokenizer::create picks one.
Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(Vocab vocab);
Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab);
Result<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(Vocab vocab);

}  // namespace kvf::load
