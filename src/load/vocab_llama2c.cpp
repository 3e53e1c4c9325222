// llama2.c tokenizer.bin reader: int32 max_token_length, then vocab_size records of
// (f32 score, int32 len, len bytes), little-endian. Every malformed byte is a kInvalidInput
// error naming the file and the byte offset.
#include <cmath>
#include <cstring>

#include "load/mapped_file.h"
#include "load/vocab_readers.h"

namespace kvf::load {
namespace {

// Reads little-endian fields in order; errors carry the file name and the offset.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return bytes_.size() - pos_; }

  template <class... Parts>
  Error fail_at(size_t at, const Parts&... parts) const {
    return invalid_input(name_, ": at byte offset ", at, ": ", parts...);
  }

  template <class T>
  Result<T> read(const char* what, int32_t token) {
    if (left() < sizeof(T)) {
      return fail_at(pos_, "truncated: ", what, token >= 0 ? str_cat(" of token ", token) : "", " needs ",
                     sizeof(T), " bytes, ", left(), " left");
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_bytes(size_t n, int32_t token) {
    if (left() < n) return fail_at(pos_, "truncated: piece of token ", token, " needs ", n, " bytes, ", left(), " left");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

bool is_byte_piece(const std::string& p) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && hex(p[3]) && hex(p[4]) && p[5] == '>';
}

// One (score, len, bytes) record, checked against max_token_length.
Status read_record(Cursor& c, int32_t id, int32_t max_len, Vocab& v) {
  const size_t at = c.pos();
  Result<float> score = c.read<float>("score", id);
  if (!score) return score.take_error();
  if (!std::isfinite(*score)) return c.fail_at(at, "score of token ", id, " is ", *score, ", not a finite number");
  const size_t len_at = c.pos();
  Result<int32_t> len = c.read<int32_t>("length", id);
  if (!len) return len.take_error();
  if (*len < 0 || *len > max_len) {
    return c.fail_at(len_at, "length ", *len, " of token ", id, " is outside 0..max_token_length ", max_len);
  }
  Result<std::string> piece = c.read_bytes(static_cast<size_t>(*len), id);
  if (!piece) return piece.take_error();
  v.scores.push_back(*score);
  v.types.push_back(is_byte_piece(*piece) ? TokenType::kByte : TokenType::kNormal);
  v.pieces.push_back(std::move(*piece));
  return Status();
}

// llama2.c's conventions: unk 0, BOS 1, EOS 2 (stored as "\n<s>\n" and "\n</s>\n"),
// plain ' ' for spaces, a dummy prefix, BOS added.
void set_llama2c_specials(Vocab& v) {
  v.kind = VocabKind::kSpm;
  v.space = " ";
  v.add_space_prefix = true;
  v.add_bos = true;
  v.add_eos = false;
  const int32_t n = v.size();
  if (n > 0) v.unk = 0, v.types[0] = TokenType::kUnknown;
  if (n > 1) v.bos = 1, v.types[1] = TokenType::kControl;
  if (n > 2) v.eos = 2, v.types[2] = TokenType::kControl;
}

}  // namespace

Result<Vocab> parse_llama2c_vocab(std::span<const uint8_t> bytes, int32_t vocab_size, const std::string& name) {
  Cursor c(bytes, name);
  if (vocab_size <= 0) return c.fail_at(0, "vocab_size ", vocab_size, " is not positive");
  Result<int32_t> max_len = c.read<int32_t>("max_token_length", -1);
  if (!max_len) return max_len.take_error();
  if (*max_len <= 0) return c.fail_at(0, "max_token_length ", *max_len, " is not positive");
  Vocab v;
  // Each record takes at least 8 bytes: never reserve more than the file can hold.
  const size_t fit = c.left() / 8;
  const size_t want = static_cast<size_t>(vocab_size) < fit ? static_cast<size_t>(vocab_size) : fit;
  v.pieces.reserve(want);
  v.scores.reserve(want);
  v.types.reserve(want);
  for (int32_t id = 0; id < vocab_size; ++id) {
    Status s = read_record(c, id, *max_len, v);
    if (!s) return s.take_error();
  }
  if (c.left() != 0) {
    return c.fail_at(c.pos(), c.left(), " bytes follow the ", vocab_size, " tokens: the tokenizer does not match the vocab size");
  }
  set_llama2c_specials(v);
  return v;
}

Result<Vocab> read_llama2c_vocab(const std::string& path, int32_t vocab_size) {
  Result<std::shared_ptr<const MappedFile>> f = MappedFile::open(path);
  if (!f) return f.take_error();
  return parse_llama2c_vocab((*f)->bytes(), vocab_size, path);
}

}  // namespace kvf::load
