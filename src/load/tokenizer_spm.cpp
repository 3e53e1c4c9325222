// SentencePiece-style BPE, as llama.cpp's SPM tokenizer does it: spaces become the vocab's
// space symbol ('▁'), the text splits into UTF-8 characters, and the adjacent pair whose
// concatenation is the highest-scoring piece merges first; leftovers fall back to <0xNN> bytes.
#include <algorithm>
#include <array>
#include <cmath>
#include <queue>
#include <string_view>
#include <unordered_map>

#include "load/tokenizer.h"

namespace kvf::load {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> the byte NN, or -1.
int byte_piece_value(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  const int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Pieces the merge loop may build and the final lookup may return. Control, unknown,
// unused and byte pieces never come out of raw text (SentencePiece keeps them reserved),
// so text such as "<s>" or "<0x0A>" is spelled out instead of becoming that token.
bool is_text_piece(TokenType t) {
  return t == TokenType::kNormal || t == TokenType::kUndefined;
}

// Length of the UTF-8 character at s[i]; 1 for a stray or truncated byte, so that every
// byte of malformed text still ends up in exactly one symbol (and round-trips as a byte).
size_t char_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3;
  else if (c >= 0xF0 && c <= 0xF4) n = 4;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || from == to) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// One run of text bytes in the working string; symbols form a doubly linked list and a
// merged symbol keeps the left one's slot (so slot order is text order).
struct Symbol {
  size_t begin = 0, len = 0;
  int32_t prev = -1, next = -1;
  int32_t fixed_id = -1;  // a user-defined piece matched whole: never merged
};

// A candidate merge of the symbol in slot `left` with its right neighbour.
struct Bigram {
  float score;
  int32_t left;
  size_t len;  // both symbols' lengths at push time; a mismatch later means stale
};

// Highest score first; on a tie the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}
  Status init();

  std::vector<int32_t> encode(const std::string& text, bool add_special) const override;
  std::string token_bytes(int32_t id) const override;

 private:
  Status validate() const;
  void add_byte_token(int32_t id, int b);
  void build_tables();
  std::string escape(const std::string& text) const;
  int32_t match_user_defined(std::string_view s, size_t at) const;
  std::vector<Symbol> split(std::string_view s) const;
  void merge(std::string_view s, std::vector<Symbol>& syms) const;
  void emit(std::string_view piece, std::vector<int32_t>& out) const;

  std::unordered_map<std::string_view, int32_t> text_ids_;  // views into vocab_.pieces
  std::array<int32_t, 256> byte_ids_{};                     // -1: no token for that byte
  std::vector<int32_t> user_defined_;                       // longest piece first
  std::vector<std::string> bytes_of_;                       // token_bytes, precomputed
};

Status SpmTokenizer::validate() const {
  const size_t n = vocab_.pieces.size();
  if (n == 0) return invalid_input("SPM tokenizer: the vocabulary is empty");
  if (vocab_.scores.size() != n) {
    return invalid_input("SPM tokenizer: ", vocab_.scores.size(), " scores for ", n, " pieces");
  }
  if (vocab_.types.size() != n) {
    return invalid_input("SPM tokenizer: ", vocab_.types.size(), " token types for ", n, " pieces");
  }
  if (vocab_.space.empty()) return invalid_input("SPM tokenizer: the space symbol is empty");
  for (int32_t id : {vocab_.bos, vocab_.eos, vocab_.unk, vocab_.pad}) {
    if (id >= vocab_.size()) return invalid_input("SPM tokenizer: special token id ", id, " is outside the vocabulary of ", n);
  }
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(vocab_.scores[i])) return invalid_input("SPM tokenizer: score of token ", i, " is NaN");
  }
  return Status();
}

// A byte token for byte b: typed kByte tokens win over plain pieces named "<0xNN>".
void SpmTokenizer::add_byte_token(int32_t id, int b) {
  bytes_of_[static_cast<size_t>(id)] = std::string(1, static_cast<char>(b));
  int32_t& slot = byte_ids_[static_cast<size_t>(b)];
  const bool typed = vocab_.types[static_cast<size_t>(id)] == TokenType::kByte;
  if (slot < 0 || (typed && vocab_.types[static_cast<size_t>(slot)] != TokenType::kByte)) slot = id;
}

void SpmTokenizer::build_tables() {
  const int32_t n = vocab_.size();
  byte_ids_.fill(-1);
  bytes_of_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
    const TokenType t = vocab_.types[static_cast<size_t>(id)];
    if (t == TokenType::kUserDefined && !p.empty()) user_defined_.push_back(id);
    if (t == TokenType::kControl) continue;  // bytes_of_ stays ""
    const int b = byte_piece_value(p);
    if (b >= 0 && (t == TokenType::kByte || is_text_piece(t))) {
      add_byte_token(id, b);  // never a merge target: text "<0x41>" stays text
      continue;
    }
    if (is_text_piece(t)) text_ids_.emplace(p, id);  // on duplicates the first id wins
    std::string text = p;
    replace_all(text, vocab_.space, " ");
    bytes_of_[static_cast<size_t>(id)] = std::move(text);
  }
  std::stable_sort(user_defined_.begin(), user_defined_.end(), [&](int32_t a, int32_t b) {
    return vocab_.pieces[static_cast<size_t>(a)].size() > vocab_.pieces[static_cast<size_t>(b)].size();
  });
}

Status SpmTokenizer::init() {
  Status s = validate();
  if (!s) return s;
  build_tables();
  for (size_t b = 0; b < 256; ++b) {
    if (byte_ids_[b] >= 0) continue;
    // No <0xNN> token: a one-byte piece of that byte will do (llama.cpp's fallback).
    const char c = static_cast<char>(b);
    auto it = text_ids_.find(std::string_view(&c, 1));
    if (it != text_ids_.end()) byte_ids_[b] = it->second;
    else if (vocab_.unk < 0) {
      return invalid_input("SPM tokenizer: no token for byte ", b, " and no unknown token, so some text cannot be encoded");
    }
  }
  return Status();
}

// The dummy prefix, then every ' ' as the vocab's space symbol.
std::string SpmTokenizer::escape(const std::string& text) const {
  std::string s = vocab_.add_space_prefix ? " " + text : text;
  replace_all(s, " ", vocab_.space);
  return s;
}

// A user-defined piece starting at s[at] (longest first); -1 if none. SentencePiece matches
// them whole before merging. llama.cpp splits them out too but then gives the text after
// each one another dummy-prefix space, which would break decode(encode(t)) == t; we don't.
int32_t SpmTokenizer::match_user_defined(std::string_view s, size_t at) const {
  for (int32_t id : user_defined_) {
    const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
    if (s.compare(at, p.size(), p) == 0) return id;
  }
  return -1;
}

std::vector<Symbol> SpmTokenizer::split(std::string_view s) const {
  std::vector<Symbol> syms;
  for (size_t i = 0; i < s.size();) {
    Symbol sym;
    sym.begin = i;
    sym.fixed_id = user_defined_.empty() ? -1 : match_user_defined(s, i);
    sym.len = sym.fixed_id >= 0 ? vocab_.pieces[static_cast<size_t>(sym.fixed_id)].size() : char_len(s, i);
    sym.prev = static_cast<int32_t>(syms.size()) - 1;
    sym.next = i + sym.len < s.size() ? static_cast<int32_t>(syms.size()) + 1 : -1;
    syms.push_back(sym);
    i += sym.len;
  }
  return syms;
}

// Merges until no adjacent pair concatenates to a text piece, best score first.
void SpmTokenizer::merge(std::string_view s, std::vector<Symbol>& syms) const {
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const Symbol& l = syms[static_cast<size_t>(left)];
    if (l.next < 0 || l.fixed_id >= 0) return;
    const Symbol& r = syms[static_cast<size_t>(l.next)];
    if (r.fixed_id >= 0) return;
    auto it = text_ids_.find(s.substr(l.begin, l.len + r.len));
    if (it == text_ids_.end()) return;
    queue.push({vocab_.scores[static_cast<size_t>(it->second)], left, l.len + r.len});
  };
  for (size_t i = 0; i < syms.size(); ++i) consider(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[static_cast<size_t>(b.left)];
    if (l.len == 0 || l.next < 0) continue;
    Symbol& r = syms[static_cast<size_t>(l.next)];
    if (l.len + r.len != b.len) continue;  // one side changed since the pair was queued
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) syms[static_cast<size_t>(l.next)].prev = b.left;
    consider(l.prev);
    consider(b.left);
  }
}

// A final symbol's id; not a piece: its bytes as byte tokens, or one unk if any is missing.
void SpmTokenizer::emit(std::string_view piece, std::vector<int32_t>& out) const {
  auto it = text_ids_.find(piece);
  if (it != text_ids_.end()) {
    out.push_back(it->second);
    return;
  }
  const size_t start = out.size();
  for (char c : piece) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) {
      out.resize(start);
      out.push_back(vocab_.unk);
      return;
    }
    out.push_back(id);
  }
}

std::vector<int32_t> SpmTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) ids.push_back(vocab_.bos);
  if (!text.empty()) {  // no dummy prefix for empty text: "" encodes to nothing
    const std::string s = escape(text);
    std::vector<Symbol> syms = split(s);
    merge(s, syms);
    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
      const Symbol& sym = syms[static_cast<size_t>(i)];
      if (sym.fixed_id >= 0) ids.push_back(sym.fixed_id);
      else emit(std::string_view(s).substr(sym.begin, sym.len), ids);
    }
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) ids.push_back(vocab_.eos);
  return ids;
}

// Byte tokens give their byte, control tokens nothing, every other piece its text with the
// space symbol turned back into ' '. The dummy-prefix space is dropped by decode (tokenizer.cpp).
std::string SpmTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return "";
  return bytes_of_[static_cast<size_t>(id)];
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(Vocab vocab) {
  if (vocab.kind != VocabKind::kSpm) return invalid_input("SPM tokenizer: the vocabulary is not SentencePiece-style");
  auto tok = std::make_unique<SpmTokenizer>(std::move(vocab));
  Status s = tok->init();
  if (!s) return s.take_error();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace kvf::load
