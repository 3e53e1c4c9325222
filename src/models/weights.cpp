// Weights lookup and integrity checks.
#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvf::models {

Result<HostTensor> Weights::get(const std::string& name, const Shape& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return invalid_input(source_, ": missing tensor ", name);
  if (it->second.shape() != shape) {
    return invalid_input(source_, ": tensor ", name, " has shape ", shape_str(it->second.shape()), ", expected ",
                         shape_str(shape));
  }
  return it->second;
}

// Scans in chunks so a large checkpoint is never widened whole.
Status Weights::check_finite(const std::function<void(int64_t done, int64_t total)>& progress) const {
  constexpr int64_t kChunk = 1 << 16;  // a multiple of every block size
  std::vector<float> buf(kChunk);
  auto scanned = [](const HostTensor& t) { return is_float(t.dtype()) || is_block_quant(t.dtype()); };
  int64_t total = 0, done = 0;
  for (const auto& [name, t] : tensors_) total += scanned(t) ? t.nbytes() : 0;
  for (const auto& [name, t] : tensors_) {
    if (!is_float(t.dtype()) && !is_block_quant(t.dtype())) continue;
    if (!t.is_contiguous()) return internal_error(source_, ": tensor ", name, " is a strided view");
    const auto* bytes = static_cast<const uint8_t*>(t.raw());
    for (int64_t start = 0; start < t.numel(); start += kChunk) {
      const int64_t n = std::min(kChunk, t.numel() - start);
      const int64_t offset = start / block_elems(t.dtype()) * block_bytes(t.dtype());
      Status s = dequantize_row(t.dtype(), bytes + offset, buf.data(), n);
      if (!s) return s.take_error().context(source_, ": tensor ", name);
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(buf[static_cast<size_t>(i)])) {
          return invalid_input(source_, ": tensor ", name, " holds a non-finite value (", buf[static_cast<size_t>(i)],
                               ") at element ", start + i);
        }
      }
      if (progress) progress(done + t.nbytes() * (start + n) / t.numel(), total);
    }
    done += t.nbytes();
  }
  return {};
}

int64_t Weights::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.numel();
  return n;
}

}  // namespace kvf::models
