// WordPiece (BERT), as HF's BertNormalizer, BertPreTokenizer and WordPiece model do it: control
// characters dropped, CJK ideographs made words of their own, accents stripped (NFD, then no
// nonspacing marks) and case lowered; words split at whitespace with punctuation isolated; then
// each word is cut greedily into the longest vocabulary pieces from its start. GGUF spells the
// pieces the other way round from tokenizer.json: a word's first piece carries a '▁' prefix and
// continuations are bare (BERT's "##ing" is "ing", its "play" is "▁play").
#include <utf8proc.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "load/tokenizer.h"

namespace kvf::load {
namespace {

constexpr std::string_view kWordStart = "\xe2\x96\x81";  // '▁'
constexpr size_t kMaxWordChars = 100;                     // longer words are [UNK] (HF's default)

// Unicode White_Space (Rust's char::is_whitespace, which HF's BERT splits on).
bool is_whitespace(utf8proc_int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// HF's "control": any Other (Cc, Cf, Cn, Co, Cs) except the whitespace controls \t \n \r.
bool is_control(utf8proc_int32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CS: return true;
    default: return false;
  }
}

bool is_punctuation(utf8proc_int32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
  const utf8proc_category_t cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// The CJK blocks BERT surrounds with spaces (HF's ranges, 0x2B920 included).
bool is_cjk(utf8proc_int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_utf8(std::string& out, utf8proc_int32_t c) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(c, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Words of text after BERT's normalizer and pre-tokenizer. Invalid UTF-8 is U+FFFD, which the
// normalizer drops.
class WordSplitter {
 public:
  WordSplitter(bool lowercase, bool strip_accents) : lowercase_(lowercase), strip_accents_(strip_accents) {}

  std::vector<std::string> split(std::string_view text) {
    words_.clear();
    current_.clear();
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (size_t i = 0; i < text.size();) {
      utf8proc_int32_t c = 0;
      const utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &c);
      i += n > 0 ? static_cast<size_t>(n) : 1;
      if (n <= 0 || c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) {
        finish();
        continue;
      }
      if (is_cjk(c)) finish();
      add_normalized(c);
      if (is_cjk(c)) finish();
    }
    finish();
    return std::move(words_);
  }

 private:
  // c after NFD, accent stripping and lower case; punctuation becomes a word of its own.
  void add_normalized(utf8proc_int32_t c) {
    utf8proc_int32_t parts[8];
    utf8proc_ssize_t n = 1;
    parts[0] = c;
    if (strip_accents_) {
      int boundclass = UTF8PROC_BOUNDCLASS_START;
      n = utf8proc_decompose_char(c, parts, 8, UTF8PROC_DECOMPOSE, &boundclass);
      if (n < 0 || n > 8) n = 1, parts[0] = c;  // cannot happen for a valid code point
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) {
      utf8proc_int32_t d = parts[k];
      if (strip_accents_ && utf8proc_category(d) == UTF8PROC_CATEGORY_MN) continue;
      if (lowercase_) d = utf8proc_tolower(d);
      if (is_punctuation(d)) {
        finish();
        append_utf8(current_, d);
        finish();
      } else {
        append_utf8(current_, d);
      }
    }
  }

  void finish() {
    if (!current_.empty()) words_.push_back(std::move(current_));
    current_.clear();
  }

  bool lowercase_, strip_accents_;
  std::vector<std::string> words_;
  std::string current_;
};

class WpmTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab) {
    if (vocab.kind != VocabKind::kWpm) return invalid_input("WordPiece tokenizer: the vocabulary is not WordPiece");
    if (vocab.types.empty()) vocab.types.assign(vocab.pieces.size(), TokenType::kNormal);
    if (vocab.types.size() != vocab.pieces.size()) {
      return invalid_input("WordPiece tokenizer: ", vocab.types.size(), " token types for ", vocab.pieces.size(), " pieces");
    }
    if (vocab.unk < 0) return invalid_input("WordPiece tokenizer: the vocabulary has no unknown token");
    std::unique_ptr<WpmTokenizer> tok(new WpmTokenizer(std::move(vocab)));
    tok->index_pieces();
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }

  std::vector<int32_t> encode(const std::string& text, bool add_special) const override {
    std::vector<int32_t> out;
    if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
    WordSplitter splitter(vocab_.lowercase, vocab_.strip_accents);
    for (const std::string& word : splitter.split(text)) encode_word(word, out);
    if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
    return out;
  }

  // A word's first piece decodes with its space, a continuation without.
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_.size()) return "";
    const auto i = static_cast<size_t>(id);
    if (vocab_.types[i] == TokenType::kControl) return "";
    const std::string& p = vocab_.pieces[i];
    return p.starts_with(kWordStart) ? " " + p.substr(kWordStart.size()) : p;
  }

 private:
  explicit WpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}

  void index_pieces() {
    ids_.reserve(vocab_.pieces.size());
    for (size_t i = 0; i < vocab_.pieces.size(); ++i) {
      if (vocab_.types[i] == TokenType::kControl) continue;  // [CLS] and the like never come from text
      ids_.emplace(vocab_.pieces[i], static_cast<int32_t>(i));
      max_piece_ = std::max(max_piece_, vocab_.pieces[i].size());
    }
  }

  // Longest piece first from each position; a word with any position no piece covers is [UNK].
  void encode_word(const std::string& word, std::vector<int32_t>& out) const {
    std::vector<size_t> starts;  // byte offset of each character, and the end
    for (size_t i = 0; i < word.size(); ++i) {
      if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) starts.push_back(i);
    }
    starts.push_back(word.size());
    if (starts.size() - 1 > kMaxWordChars) {
      out.push_back(vocab_.unk);
      return;
    }
    const size_t first = out.size();
    std::string key;
    for (size_t s = 0; s + 1 < starts.size();) {
      int32_t id = -1;
      size_t e = starts.size() - 1;
      for (; e > s; --e) {
        const size_t len = starts[e] - starts[s];
        key.assign(s == 0 ? kWordStart : std::string_view());
        if (key.size() + len > max_piece_) continue;
        key.append(word, starts[s], len);
        const auto it = ids_.find(key);
        if (it != ids_.end()) {
          id = it->second;
          break;
        }
      }
      if (id < 0) {
        out.resize(first);
        out.push_back(vocab_.unk);
        return;
      }
      out.push_back(id);
      s = e;
    }
  }

  std::unordered_map<std::string, int32_t> ids_;
  size_t max_piece_ = 0;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wpm_tokenizer(Vocab vocab) { return WpmTokenizer::make(std::move(vocab)); }

}  // namespace kvf::load
