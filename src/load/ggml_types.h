// ggml's tensor types as GGUF stores them: ids, block geometry, exact dequantization.
// Types kvforge computes on directly (f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, i32, i8)
// map to a DType and stay borrowed; the rest are dequantized to f32 at load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace kvf::load {

enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kBF16 = 30,
};

struct GgmlTypeInfo {
  std::string name;
  int64_t block_elems = 0;
  int64_t block_bytes = 0;
  bool dequantizable = false;  // kvforge can turn it into f32
};

// Geometry of a type id, or kUnsupported naming an id kvforge does not know.
Result<GgmlTypeInfo> ggml_type_info(uint32_t type);
// The DType a tensor of this type keeps when borrowed as-is, if any.
std::optional<DType> ggml_storage_dtype(uint32_t type);
// Decodes n elements (a whole number of blocks) at src into dst.
Status ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace kvf::load
