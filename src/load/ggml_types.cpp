// Block layouts and dequantization of ggml's types, as ggml-quants defines them.
#include "load/ggml_types.h"

#include <cstring>

namespace kvf::load {
namespace {

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

constexpr int64_t kQK = 32;    // elements per legacy block
constexpr int64_t kQKK = 256;  // elements per k-quant super-block

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

// q4_k's packed 6-bit scale and min of sub-block j (0..7).
void scale_min_k4(int j, const uint8_t* s, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// q4_k: d, dmin (f16), scales[12], qs[128]; 8 sub-blocks of 32 with 6-bit scale and min.
void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
    int sc, mn;
    scale_min_k4(is, scales, sc, mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    scale_min_k4(is + 1, scales, sc, mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * static_cast<float>(q[l] & 15) - m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

// q6_k: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (i8), d (f16).
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < kQKK; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[n + l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[n + l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[n + l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[n + l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
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
    case GgmlType::kQ2_K: return GgmlTypeInfo{"Q2_K", kQKK, 84, false};
    case GgmlType::kQ3_K: return GgmlTypeInfo{"Q3_K", kQKK, 110, false};
    case GgmlType::kQ4_K: return GgmlTypeInfo{"Q4_K", kQKK, 144, true};
    case GgmlType::kQ5_K: return GgmlTypeInfo{"Q5_K", kQKK, 176, false};
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
      case GgmlType::kQ4_K: dequant_q4_k(b, y); break;
      case GgmlType::kQ6_K: dequant_q6_k(b, y); break;
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
