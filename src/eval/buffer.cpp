// Buffer construction, host conversion and the broadcast walker.
#include "eval/buffer.h"

#include <cstring>

namespace kvf::eval {

Result<Buffer> Buffer::zeros(DType dtype, Shape shape) {
  if (is_block_quant(dtype)) return unsupported("oracle buffers hold plain dtypes, not ", dtype_name(dtype));
  Result<int64_t> n = checked_numel(shape);
  if (!n) return n.take_error();
  Buffer b;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.data.assign(static_cast<size_t>(*n), 0.0);
  return b;
}

Result<Buffer> Buffer::of(DType dtype, Shape shape, std::vector<double> values) {
  Result<Buffer> b = zeros(dtype, std::move(shape));
  if (!b) return b;
  if (values.size() != b->data.size()) {
    return invalid_input("buffer ", shape_str(b->shape), " needs ", b->data.size(), " values, got ", values.size());
  }
  b->data = std::move(values);
  return b;
}

Result<Buffer> Buffer::i32(Shape shape, const std::vector<int32_t>& values) {
  return of(DType::kI32, std::move(shape), std::vector<double>(values.begin(), values.end()));
}

Result<Buffer> from_host(const HostTensor& t) {
  Buffer b;
  b.dtype = is_block_quant(t.dtype()) ? DType::kF32 : t.dtype();
  b.shape = t.shape();
  if (t.numel() == 0) return b;  // nothing to read (and to_f32 would memcpy into a null vector)
  if (t.dtype() == DType::kI32) {  // read directly, not through f32: exact beyond 2^24, strided or not
    const int32_t* p = t.data<int32_t>();
    const Shape& strides = t.strides();
    std::vector<int64_t> idx(b.shape.size(), 0);
    b.data.resize(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t off = 0;
      for (size_t a = 0; a < idx.size(); ++a) off += idx[a] * strides[a];
      b.data[static_cast<size_t>(i)] = p[off];
      for (size_t a = idx.size(); a-- > 0;) {
        if (++idx[a] < b.shape[a]) break;
        idx[a] = 0;
      }
    }
    return b;
  }
  Result<std::vector<float>> f = t.to_f32();
  if (!f) return f.take_error();
  b.data.assign(f->begin(), f->end());
  return b;
}

Result<HostTensor> to_host(const Buffer& b) {
  const DType dt = is_float(b.dtype) ? DType::kF32 : b.dtype;
  Result<HostTensor> t = HostTensor::zeros(dt, b.shape);
  if (!t) return t;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double x = b.data[static_cast<size_t>(i)];
    switch (dt) {
      case DType::kF32: t->data<float>()[i] = static_cast<float>(x); break;
      case DType::kI32: t->data<int32_t>()[i] = static_cast<int32_t>(x); break;
      case DType::kI8: t->data<int8_t>()[i] = static_cast<int8_t>(x); break;
      case DType::kBool: t->data<uint8_t>()[i] = x != 0 ? 1 : 0; break;
      default: return internal_error("to_host: unexpected dtype ", dtype_name(dt));
    }
  }
  return t;
}

void for_each_broadcast(const Shape& out, const std::vector<Shape>& operands,
                        const std::function<void(int64_t, std::span<const int64_t>)>& fn) {
  const size_t rank = out.size();
  const size_t n_ops = operands.size();
  // Per operand, per output axis: the step in that operand (0 where it is broadcast).
  std::vector<std::vector<int64_t>> steps(n_ops, std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < n_ops; ++k) {
    const Shape& s = operands[k];
    const size_t off = rank - s.size();
    int64_t stride = 1;
    for (size_t a = s.size(); a-- > 0;) {
      steps[k][off + a] = s[a] == 1 ? 0 : stride;
      stride *= s[a];
    }
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  if (total == 0) return;
  std::vector<int64_t> idx(rank, 0), offs(n_ops, 0);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, offs);
    for (size_t a = rank; a-- > 0;) {  // odometer step, keeping every operand offset in sync
      ++idx[a];
      for (size_t k = 0; k < n_ops; ++k) offs[k] += steps[k][a];
      if (idx[a] < out[a]) break;
      for (size_t k = 0; k < n_ops; ++k) offs[k] -= steps[k][a] * out[a];
      idx[a] = 0;
    }
  }
}

}  // namespace kvf::eval
