// A view of one executor buffer (host or device): contiguous row-major storage of `type`.
// f32 is float, i32 int32_t, pred uint8_t, f16/bf16 uint16_t, q8_0/q4_0 their blocks.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace kvf::exec {

struct Ref {
  void* data = nullptr;
  ir::TensorType type;
  int64_t numel = 0;

  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
  uint8_t* pred() const { return static_cast<uint8_t*>(data); }
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  int64_t dim(int64_t axis) const { return type.shape[static_cast<size_t>(axis < 0 ? axis + rank() : axis)]; }
  int64_t rank() const { return static_cast<int64_t>(type.shape.size()); }
};

}  // namespace kvf::exec
