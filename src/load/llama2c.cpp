// llama2.c legacy checkpoint reader: header checks, exact size accounting, borrowed slices.
#include "load/llama2c.h"

#include <cstdlib>
#include <cstring>
#include <functional>

namespace kvf::load {
namespace {

constexpr int64_t kHeaderBytes = 7 * 4;

Status check_header(const Llama2cHeader& h, const std::string& name) {
  const int32_t fields[] = {h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len};
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const int64_t v = i == 5 ? std::abs(int64_t{fields[i]}) : int64_t{fields[i]};  // not vocab(): -INT32_MIN overflows
    if (fields[i] == 0 || v <= 0 || v > (1 << 22)) {
      return invalid_input(name, ": header field ", names[i], " = ", fields[i], " (offset ", 4 * i, ") is out of range");
    }
  }
  if (h.dim % h.n_heads != 0) return invalid_input(name, ": dim ", h.dim, " is not a multiple of n_heads ", h.n_heads);
  if (h.n_heads % h.n_kv_heads != 0) {
    return invalid_input(name, ": n_heads ", h.n_heads, " is not a multiple of n_kv_heads ", h.n_kv_heads);
  }
  if ((h.dim / h.n_heads) % 2 != 0) return invalid_input(name, ": head size ", h.dim / h.n_heads, " is odd");
  return {};
}

// Carves consecutive f32 tensors out of the weight area, in file order.
class Carver {
 public:
  Carver(std::span<const uint8_t> bytes, const std::string& name, std::shared_ptr<const void> keep,
         Llama2cCheckpoint& ck)
      : bytes_(bytes), name_(name), keep_(std::move(keep)), ck_(ck) {}

  // One tensor stored whole.
  Status take(const std::string& key, Shape shape) { return take_at(key, std::move(shape)); }

  // A [layers, ...] array stored as one block: one borrowed tensor per layer.
  Status take_layers(const std::string& suffix, int64_t layers, const Shape& per_layer) {
    for (int64_t l = 0; l < layers; ++l) {
      Status s = take_at(str_cat("blk.", l, ".", suffix), per_layer);
      if (!s) return s;
    }
    return {};
  }

  Status skip(const std::string& what, int64_t floats) {
    if (pos_ + floats * 4 > size()) return truncated(what, floats * 4);
    pos_ += floats * 4;
    return {};
  }
  int64_t pos() const { return pos_; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }

 private:
  Error truncated(const std::string& what, int64_t need) const {
    return invalid_input(name_, ": truncated at offset ", pos_, ": ", what, " needs ", need, " bytes, ", size() - pos_,
                         " left");
  }

  Status take_at(const std::string& key, Shape shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (pos_ + n * 4 > size()) return truncated(key, n * 4);
    Result<HostTensor> t = HostTensor::borrow(DType::kF32, std::move(shape), bytes_.data() + pos_, n * 4, keep_);
    if (!t) return t.take_error();
    ck_.tensors[key] = std::move(*t);
    pos_ += n * 4;
    return {};
  }

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  std::shared_ptr<const void> keep_;
  Llama2cCheckpoint& ck_;
  int64_t pos_ = kHeaderBytes;
};

}  // namespace

Result<Llama2cCheckpoint> parse_llama2c(std::span<const uint8_t> bytes, const std::string& name,
                                        std::shared_ptr<const void> keepalive) {
  if (static_cast<int64_t>(bytes.size()) < kHeaderBytes) {
    return invalid_input(name, ": ", bytes.size(), " bytes is shorter than the 28-byte llama2.c header");
  }
  Llama2cCheckpoint ck;
  Llama2cHeader& h = ck.header;
  std::memcpy(&h, bytes.data(), kHeaderBytes);
  // llama2.c's export.py writes the version-1+ magic as struct.pack('I', 0x616b3432): the
  // little-endian bytes "24ka", which read back as that uint32.
  uint32_t magic = 0;
  std::memcpy(&magic, bytes.data(), sizeof magic);
  if (magic == 0x616b3432u) {
    return unsupported(name, ": llama2.c format version 1+ (magic ak42) is not supported; export with the legacy format");
  }
  Status s = check_header(h, name);
  if (!s) return s.take_error();
  const int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers, vocab = h.vocab();
  const int64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  Carver c(bytes, name, std::move(keepalive), ck);
  // llama2.c's file order; the first step that does not fit stops the read.
  const std::function<Status()> steps[] = {
      [&] { return c.take("token_embd.weight", {vocab, dim}); },
      [&] { return c.take_layers("attn_norm.weight", layers, {dim}); },
      [&] { return c.take_layers("attn_q.weight", layers, {dim, dim}); },
      [&] { return c.take_layers("attn_k.weight", layers, {kv_dim, dim}); },
      [&] { return c.take_layers("attn_v.weight", layers, {kv_dim, dim}); },
      [&] { return c.take_layers("attn_output.weight", layers, {dim, dim}); },
      [&] { return c.take_layers("ffn_norm.weight", layers, {dim}); },
      [&] { return c.take_layers("ffn_gate.weight", layers, {hidden, dim}); },
      [&] { return c.take_layers("ffn_down.weight", layers, {dim, hidden}); },
      [&] { return c.take_layers("ffn_up.weight", layers, {hidden, dim}); },
      [&] { return c.take("output_norm.weight", {dim}); },
      [&] { return c.skip("freq_cis tables", int64_t{h.seq_len} * head); },  // real + imaginary halves: unused
      [&] { return h.shared_classifier() ? Status() : c.take("output.weight", {vocab, dim}); },
  };
  for (const auto& step : steps) {
    Status st = step();
    if (!st) return st.take_error();
  }
  if (c.pos() != c.size()) {
    return invalid_input(name, ": ", c.size() - c.pos(), " trailing bytes after the weights (offset ", c.pos(),
                         "); the header does not describe this file");
  }
  return ck;
}

Result<Llama2cCheckpoint> read_llama2c(const std::string& path) {
  Result<std::shared_ptr<const MappedFile>> f = MappedFile::open(path);
  if (!f) return f.take_error();
  std::shared_ptr<const MappedFile> file = *f;
  return parse_llama2c(file->bytes(), path, std::shared_ptr<const void>(file, file.get()));
}

}  // namespace kvf::load
