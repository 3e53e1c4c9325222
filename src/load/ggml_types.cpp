// Block layouts and dequantization of ggml's types, as ggml-quants defines them.
#include "load/ggml_types.h"

#include <cstring>

#include "core/kquants.h"

namespace kvf::load {
namespace {

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

constexpr int64_t kQK = 32;    // elements per legacy block
constexpr int64_t kQKK = kKQuantElems;

// q4_1: d, m (f16), qs[16]: x = d * nibble + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 15) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// q5_0 / q5_1: the fifth bit of element j is bit j of qh (elements 16..31: bits 16..31).
void dequant_q5(const uint8_t* b, float* y, bool with_min) {
  const float d = half(b);
  const float m = with_min ? half(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int offset = with_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo - offset) + m;
    y[j + 16] = d * static_cast<float>(hi - offset) + m;
  }
}

}  // namespace

Result<GgmlTypeInfo> ggml_type_info(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return GgmlTypeInfo{"F32", 1, 4, true};
    case GgmlType::kF16: return GgmlTypeInfo{"F16", 1, 2, true};
    case GgmlType::kBF16: return GgmlTypeInfo{"BF16", 1, 2, true};
    case GgmlType::kQ4_0: return GgmlTypeInfo{"Q4_0", kQK, 18, true};
    case GgmlType::kQ4_1: return GgmlTypeInfo{"Q4_1", kQK, 20, true};
    case GgmlType::kQ5_0: return GgmlTypeInfo{"Q5_0", kQK, 22, true};
    case GgmlType::kQ5_1: return GgmlTypeInfo{"Q5_1", kQK, 24, true};
    case GgmlType::kQ8_0: return GgmlTypeInfo{"Q8_0", kQK, 34, true};
    case GgmlType::kQ8_1: return GgmlTypeInfo{"Q8_1", kQK, 36, false};
    case GgmlType::kQ2_K: return GgmlTypeInfo{"Q2_K", kQKK, 84, true};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"Q3_K", kQKK, 110, true};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"Q4_K", kQKK, 144, true};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"Q5_K", kQKK, 176, true};
    case GgmlType::kQ6_K: return GgmlTypeInfo{"Q6_K", kQKK, 210, true};
    case GgmlType::kQ8_K: return GgmlTypeInfo{"Q8_K", kQKK, 292, false};
    case GgmlType::kI8: return GgmlTypeInfo{"I8", 1, 1, false};
    case GgmlType::kI16: return GgmlTypeInfo{"I16", 1, 2, false};
    case GgmlType::kI32: return GgmlTypeInfo{"I32", 1, 4, false};
    case GgmlType::kI64: return GgmlTypeInfo{"I64", 1, 8, false};
    case GgmlType::kF64: return GgmlTypeInfo{"F64", 1, 8, false};
  }
  return unsupported("ggml tensor type ", type, " is not known to kvforge");
}

std::optional<DType> ggml_storage_dtype(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    case GgmlType::kQ4_0: return DType::kQ4_0;
    case GgmlType::kQ8_0: return DType::kQ8_0;
    case GgmlType::kQ4_K: return DType::kQ4_K;
    case GgmlType::kQ5_K: return DType::kQ5_K;
    case GgmlType::kQ6_K: return DType::kQ6_K;
    case GgmlType::kI32: return DType::kI32;
    case GgmlType::kI8: return DType::kI8;
    default: return std::nullopt;
  }
}

Status ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  Result<GgmlTypeInfo> info = ggml_type_info(type);
  if (!info) return info.take_error();
  if (!info->dequantizable) return unsupported("dequantizing ggml type ", info->name, " is not implemented");
  if (n % info->block_elems != 0) {
    return invalid_input(n, " elements of ", info->name, " is not a whole number of ", info->block_elems, "-element blocks");
  }
  const int64_t blocks = n / info->block_elems;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * info->block_bytes;
    float* y = dst + i * info->block_elems;
    switch (static_cast<GgmlType>(type)) {
      case GgmlType::kQ4_1: dequant_q4_1(b, y); break;
      case GgmlType::kQ5_0: dequant_q5(b, y, false); break;
      case GgmlType::kQ5_1: dequant_q5(b, y, true); break;
      case GgmlType::kQ2_K: dequantize_q2_k(b, y, 1); break;
      case GgmlType::kQ3_K: dequantize_q3_k(b, y, 1); break;
      default: {  // the plain and legacy types core already decodes
        std::optional<DType> dt = ggml_storage_dtype(type);
        if (!dt) return internal_error("ggml_dequantize: no decoder for ", info->name);
        return dequantize_row(*dt, src, dst, n);
      }
    }
  }
  return {};
}

}  // namespace kvf::load
