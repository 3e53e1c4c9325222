// Element types, half conversions (bit-exact RNE) and block dequantization.
#include "core/dtype.h"

#include <cmath>
#include <cstring>

#include "core/kquants.h"

namespace kvf {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kBool: return "pred";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
  }
  return "?";
}

Result<DType> parse_dtype(std::string_view name) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI8, DType::kBool,
                   DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    if (dtype_name(dt) == name) return dt;
  }
  return invalid_input("unknown dtype '", name, "' (expected f32, f16, bf16, i32, i8, pred, q8_0, q4_0, q4_k, q5_k, q6_k)");
}

bool is_float(DType dt) { return dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16; }
bool is_integer(DType dt) { return dt == DType::kI32 || dt == DType::kI8; }
bool is_block_quant(DType dt) { return dt == DType::kQ8_0 || dt == DType::kQ4_0 || is_kquant(dt); }
bool is_kquant(DType dt) { return dt == DType::kQ4_K || dt == DType::kQ5_K || dt == DType::kQ6_K; }

int64_t block_elems(DType dt) { return is_kquant(dt) ? kKQuantElems : is_block_quant(dt) ? 32 : 1; }

int64_t block_bytes(DType dt) {
  switch (dt) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI8: case DType::kBool: return 1;
    case DType::kQ8_0: return sizeof(BlockQ8_0);
    case DType::kQ4_0: return sizeof(BlockQ4_0);
    case DType::kQ4_K: return sizeof(BlockQ4_K);
    case DType::kQ5_K: return sizeof(BlockQ5_K);
    case DType::kQ6_K: return sizeof(BlockQ6_K);
  }
  return 0;
}

Result<int64_t> storage_bytes(DType dt, int64_t n) {
  if (n < 0) return invalid_input("negative element count ", n);
  int64_t be = block_elems(dt);
  if (n % be != 0) {
    return invalid_input(n, " elements of ", dtype_name(dt), " is not a multiple of its block of ", be);
  }
  return n / be * block_bytes(dt);
}

uint16_t f32_to_f16_bits(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN; a NaN keeps its top payload bits and is quieted
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds (to even) past 65504
  if (a <= 0x33000000u) return sign;             // <= 2^-25: ties to the even zero
  const uint32_t e = a >> 23;
  if (e < 113) {  // half subnormal: value = k * 2^-24
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t s = 126 - e;
    uint32_t k = m >> s;
    const uint32_t rem = m & ((1u << s) - 1);
    const uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (k & 1u))) ++k;  // may carry into the first normal: correct
    return static_cast<uint16_t>(sign | k);
  }
  uint32_t h = ((e - 112) << 10) | ((a >> 13) & 0x3ffu);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float mag = std::ldexp(static_cast<float>(m), -24);  // exact: m < 2^10
    return sign ? -mag : mag;
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));  // NaN comes out quiet
  return float_of(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t f32_to_bf16_bits(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  return float_of((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);  // NaN comes out quiet
}

namespace {
// x narrowed to f32 with round-to-odd (truncate, then set the last bit if inexact). f32 keeps
// at least two more bits than f16/bf16, so rounding this to nearest-even once more equals
// rounding x directly; a plain RNE cast first would double-round (1 + 2^-11 + 2^-40 -> 1).
float f32_round_to_odd(double x) {
  const float f = static_cast<float>(x);
  if (!std::isfinite(x) || static_cast<double>(f) == x) return f;
  const float t = std::fabs(static_cast<double>(f)) > std::fabs(x) ? std::nextafter(f, 0.0f) : f;
  return float_of(bits_of(t) | 1u);
}
}  // namespace

double round_to_dtype(DType dt, double x) {
  switch (dt) {
    case DType::kF32: return static_cast<float>(x);
    case DType::kF16: return f16_bits_to_f32(f32_to_f16_bits(f32_round_to_odd(x)));
    case DType::kBF16: return bf16_bits_to_f32(f32_to_bf16_bits(f32_round_to_odd(x)));
    default: return x;
  }
}

Status dequantize_row(DType dt, const void* src, float* out, int64_t n) {
  if (n % block_elems(dt) != 0) {
    return invalid_input("row of ", n, " elements is not a whole number of ", dtype_name(dt), " blocks");
  }
  if (n == 0) return {};  // nothing to read; src may be null
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (dt) {
    case DType::kF32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      return {};
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = dt == DType::kF16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
      }
      return {};
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, bytes + b * sizeof(BlockQ8_0), sizeof blk);
        const float d = f16_bits_to_f32(blk.d);
        for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * static_cast<float>(blk.qs[i]);
      }
      return {};
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, bytes + b * sizeof(BlockQ4_0), sizeof blk);
        const float d = f16_bits_to_f32(blk.d);
        for (int i = 0; i < 16; ++i) {
          out[b * 32 + i] = d * static_cast<float>((blk.qs[i] & 15) - 8);
          out[b * 32 + i + 16] = d * static_cast<float>((blk.qs[i] >> 4) - 8);
        }
      }
      return {};
    case DType::kQ4_K: dequantize_q4_k(bytes, out, n / kKQuantElems); return {};
    case DType::kQ5_K: dequantize_q5_k(bytes, out, n / kKQuantElems); return {};
    case DType::kQ6_K: dequantize_q6_k(bytes, out, n / kKQuantElems); return {};
    case DType::kI32:
    case DType::kI8:
    case DType::kBool:
      break;
  }
  return unsupported("dequantize_row: ", dtype_name(dt), " is not a float storage type");
}

}  // namespace kvf
