// HostTensor: owning and borrowed host views, reshape/permute views, f32 widening.
#include "core/tensor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace kvf {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<int64_t> checked_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return invalid_input("negative dimension in shape ", shape_str(shape));
    if (d != 0 && n > (int64_t{1} << 62) / d) return invalid_input("shape ", shape_str(shape), " is too large");
    n *= d;
  }
  return n;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

void broadcast_strides(const Shape& operand, const Shape& out, int64_t* strides) {
  const size_t rank = out.size(), lead = rank - std::min(rank, operand.size());
  int64_t s = 1;
  for (size_t a = rank; a-- > 0;) {
    if (a < lead) {
      strides[a] = 0;
      continue;
    }
    const int64_t d = operand[a - lead];
    strides[a] = d == 1 && out[a] != 1 ? 0 : s;
    s *= d;
  }
}

int64_t HostTensor::nbytes() const { return numel_ / block_elems(dtype_) * block_bytes(dtype_); }

Result<HostTensor> HostTensor::zeros(DType dtype, Shape shape) {
  Result<int64_t> n = checked_numel(shape);
  if (!n) return n.take_error();
  Result<int64_t> bytes = storage_bytes(dtype, *n);
  if (!bytes) return bytes.take_error().context("tensor ", shape_str(shape));
  HostTensor t;
  auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[static_cast<size_t>(*bytes) + 1]());
  t.data_ = buf.get();
  t.owner_ = std::shared_ptr<const void>(buf, buf.get());
  t.owning_ = true;
  t.dtype_ = dtype;
  t.numel_ = *n;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Result<HostTensor> HostTensor::from_f32(Shape shape, std::span<const float> values) {
  Result<HostTensor> t = zeros(DType::kF32, std::move(shape));
  if (!t) return t;
  if (static_cast<int64_t>(values.size()) != t->numel()) {
    return invalid_input("from_f32: ", values.size(), " values for shape ", shape_str(t->shape()));
  }
  if (!values.empty()) std::memcpy(t->raw_mut(), values.data(), values.size() * 4);
  return t;
}

Result<HostTensor> HostTensor::from_i32(Shape shape, std::span<const int32_t> values) {
  Result<HostTensor> t = zeros(DType::kI32, std::move(shape));
  if (!t) return t;
  if (static_cast<int64_t>(values.size()) != t->numel()) {
    return invalid_input("from_i32: ", values.size(), " values for shape ", shape_str(t->shape()));
  }
  if (!values.empty()) std::memcpy(t->raw_mut(), values.data(), values.size() * 4);
  return t;
}

Result<HostTensor> HostTensor::borrow(DType dtype, Shape shape, const void* data, int64_t bytes,
                                      std::shared_ptr<const void> keepalive) {
  Result<int64_t> n = checked_numel(shape);
  if (!n) return n.take_error();
  Result<int64_t> need = storage_bytes(dtype, *n);
  if (!need) return need.take_error().context("tensor ", shape_str(shape));
  if (*need > bytes) {
    return invalid_input("tensor ", dtype_name(dtype), shape_str(shape), " needs ", *need,
                         " bytes but only ", bytes, " are available");
  }
  HostTensor t;
  t.data_ = const_cast<void*>(data);
  t.owner_ = std::move(keepalive);
  t.dtype_ = dtype;
  t.numel_ = *n;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Result<HostTensor> HostTensor::reshape(Shape shape) const {
  if (!is_contiguous()) return invalid_input("reshape of a strided view; copy it first");
  Result<int64_t> n = checked_numel(shape);
  if (!n) return n.take_error();
  if (*n != numel_) {
    return invalid_input("reshape ", shape_str(shape_), " to ", shape_str(shape), ": element counts differ");
  }
  HostTensor t = *this;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Result<HostTensor> HostTensor::index0(int64_t i) const {
  if (!is_contiguous() || rank() < 2) return invalid_input("index0 of ", shape_str(shape_), ": needs a contiguous tensor of rank 2 or more");
  if (i < 0 || i >= shape_[0]) return invalid_input("index0: ", i, " is outside axis 0 of ", shape_str(shape_));
  const int64_t bytes = nbytes() / shape_[0];
  return borrow(dtype_, Shape(shape_.begin() + 1, shape_.end()), static_cast<const char*>(data_) + i * bytes, bytes, owner_);
}

Result<HostTensor> HostTensor::permute(const std::vector<int64_t>& perm) const {
  if (is_block_quant(dtype_)) return unsupported("permute of block-quantized ", dtype_name(dtype_));
  if (perm.size() != shape_.size()) return invalid_input("permute: perm rank differs from tensor rank");
  std::vector<bool> seen(perm.size(), false);
  HostTensor t = *this;
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= rank() || seen[p]) return invalid_input("permute: perm is not a permutation");
    seen[p] = true;
    t.shape_[i] = shape_[p];
    t.strides_[i] = strides_[p];
  }
  return t;
}

Result<HostTensor> HostTensor::contiguous() const {
  if (is_block_quant(dtype_)) return unsupported("contiguous copy of block-quantized ", dtype_name(dtype_));
  Result<HostTensor> out = zeros(dtype_, shape_);
  if (!out) return out;
  const int64_t esize = block_bytes(dtype_);
  Shape idx(shape_.size(), 0);
  const auto* src = static_cast<const uint8_t*>(data_);
  auto* dst = static_cast<uint8_t*>(out->data_);
  for (int64_t i = 0; i < numel_; ++i) {
    int64_t off = 0;
    for (size_t a = 0; a < idx.size(); ++a) off += idx[a] * strides_[a];
    std::memcpy(dst + i * esize, src + off * esize, static_cast<size_t>(esize));
    for (size_t a = idx.size(); a-- > 0;) {
      if (++idx[a] < shape_[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

Result<std::vector<float>> HostTensor::to_f32() const {
  std::vector<float> out(static_cast<size_t>(numel_));
  if (is_contiguous() && is_float(dtype_)) {
    Status s = dequantize_row(dtype_, data_, out.data(), numel_);
    if (!s) return s.take_error();
    return out;
  }
  if (is_block_quant(dtype_)) {
    Status s = dequantize_row(dtype_, data_, out.data(), numel_);
    if (!s) return s.take_error();
    return out;
  }
  // Plain element types, possibly strided: walk the logical index.
  Shape idx(shape_.size(), 0);
  const auto* base = static_cast<const uint8_t*>(data_);
  const int64_t esize = block_bytes(dtype_);
  for (int64_t i = 0; i < numel_; ++i) {
    int64_t off = 0;
    for (size_t a = 0; a < idx.size(); ++a) off += idx[a] * strides_[a];
    const uint8_t* p = base + off * esize;
    float v = 0;
    switch (dtype_) {
      case DType::kF32: std::memcpy(&v, p, 4); break;
      case DType::kF16: case DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        v = dtype_ == DType::kF16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
        break;
      }
      case DType::kI32: { int32_t x; std::memcpy(&x, p, 4); v = static_cast<float>(x); break; }
      case DType::kI8: v = static_cast<float>(*reinterpret_cast<const int8_t*>(p)); break;
      case DType::kBool: v = *p ? 1.0f : 0.0f; break;
      default: return internal_error("to_f32: unreachable dtype");
    }
    out[static_cast<size_t>(i)] = v;
    for (size_t a = idx.size(); a-- > 0;) {
      if (++idx[a] < shape_[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

}  // namespace kvf
