// NumPy .npy (format 1.0) for float32 arrays: what `kvforge logits` writes and tests read.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kvf::load {

Status write_npy_f32(const std::string& path, const Shape& shape, std::span<const float> values);
// Reads a little-endian float32 C-order .npy written by write_npy_f32 or numpy.
struct NpyArray {
  Shape shape;
  std::vector<float> values;
};
Result<NpyArray> read_npy_f32(const std::string& path);

}  // namespace kvf::load
