// Tokenizer dispatch, decoding and UTF-8-safe streaming.
#include "load/tokenizer.h"

namespace kvf::load {

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocab vocab) {
  if (vocab.pieces.empty()) return invalid_input("tokenizer: the vocabulary is empty");
  for (int32_t id : {vocab.bos, vocab.eos, vocab.unk, vocab.pad}) {
    if (id >= vocab.size()) return invalid_input("tokenizer: special token id ", id, " is outside the vocabulary of ", vocab.size());
  }
  switch (vocab.kind) {
    case VocabKind::kSpm: return make_spm_tokenizer(std::move(vocab));
    case VocabKind::kBpe: return make_bpe_tokenizer(std::move(vocab));
    case VocabKind::kWpm: return make_wpm_tokenizer(std::move(vocab));
  }
  return invalid_input("tokenizer: unknown vocabulary kind");
}

namespace {

// SentencePiece's dummy prefix: encode() put a space before the text, so the first token
// that yields text loses one leading ' ' (as SentencePiece and llama.cpp's detokenize do);
// likewise WordPiece's first word.
// Control tokens (BOS) yield nothing and do not count as that first token.
std::string text_of(const Tokenizer& tok, int32_t id, bool& at_start) {
  std::string s = tok.token_bytes(id);
  if (at_start && !s.empty()) {
    at_start = false;
    const Vocab& v = tok.vocab();
    const bool prefixed = (v.kind == VocabKind::kSpm && v.add_space_prefix) || v.kind == VocabKind::kWpm;
    if (prefixed && s[0] == ' ') s.erase(0, 1);
  }
  return s;
}

// Length of the UTF-8 sequence a lead byte announces (1 for ASCII and for stray bytes).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4) return 4;
  if (c >= 0xE0) return c <= 0xEF ? 3 : 1;
  if (c >= 0xC2) return 2;
  return 1;
}

// How many leading bytes of s are whole characters (a trailing incomplete one is held).
size_t complete_prefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_len(static_cast<unsigned char>(s[i]));
    if (i + n > s.size()) {
      for (size_t k = i + 1; k < s.size(); ++k) {  // held only if the tail is a valid prefix
        if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) return s.size();
      }
      return i;
    }
    i += n;
  }
  return s.size();
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) out += text_of(*this, id, at_start);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += text_of(tok_, id, at_start_);
  const size_t n = complete_prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace kvf::load
