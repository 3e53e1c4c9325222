// Buffer: the oracle's value representation. Every element is a double (floats after
// rounding to their dtype, integers and preds exactly), laid out row-major.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace kvf::eval {

struct Buffer {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<double> data;

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  static Result<Buffer> zeros(DType dtype, Shape shape);
  // Convenience constructors for tests and drivers; the element count must match.
  static Result<Buffer> of(DType dtype, Shape shape, std::vector<double> values);
  static Result<Buffer> i32(Shape shape, const std::vector<int32_t>& values);
};

// Widens a host tensor (any dtype, incl. q8_0/q4_0 and strided views) into a Buffer.
Result<Buffer> from_host(const HostTensor& t);
// Narrows a Buffer into a fresh f32 / i32 / pred host tensor of the same dtype
// (f16 and bf16 buffers come back as f32 tensors holding the rounded values).
Result<HostTensor> to_host(const Buffer& b);

// Walks every index of `out` (row-major) and, for each operand shape, the row-major offset
// of the element numpy broadcasting maps it to. fn(out_offset, operand_offsets).
void for_each_broadcast(const Shape& out, const std::vector<Shape>& operands,
                        const std::function<void(int64_t, std::span<const int64_t>)>& fn);

}  // namespace kvf::eval
