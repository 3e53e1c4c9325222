// Element types, half-precision conversions and GGUF block dequantization.
// Storage only: arithmetic happens in f32/f64 in eval/ and in the kernels of exec/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"

namespace kvf {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI8,
  kBool,  // predicate: the result of compare, the first operand of select
  kQ8_0,  // GGUF block: f16 scale + 32 x int8
  kQ4_0,  // GGUF block: f16 scale + 32 x 4-bit (offset 8)
  kQ4_K,  // GGUF super-block of 256: 4-bit, 8 scales and mins (core/kquants.h)
  kQ5_K,  // GGUF super-block of 256: 5-bit, 8 scales and mins
  kQ6_K,  // GGUF super-block of 256: 6-bit, 16 signed scales
};

std::string_view dtype_name(DType dt);
Result<DType> parse_dtype(std::string_view name);

bool is_float(DType dt);         // f32, f16, bf16
bool is_integer(DType dt);       // i32, i8
bool is_block_quant(DType dt);   // q8_0, q4_0 and the k-quants
bool is_kquant(DType dt);        // q4_k, q5_k, q6_k
int64_t block_elems(DType dt);   // elements per storage block (1 for plain types)
int64_t block_bytes(DType dt);   // bytes per storage block
// Bytes that n elements occupy; n must be a multiple of block_elems(dt).
Result<int64_t> storage_bytes(DType dt, int64_t n);

// IEEE conversions with round-to-nearest-even; NaN stays NaN (quieted), inf stays inf.
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float x);
float bf16_bits_to_f32(uint16_t h);

// Rounds x to the nearest value representable in dt (a float dtype), returned widened.
double round_to_dtype(DType dt, double x);

// GGUF block layouts (ggml's block_q8_0 / block_q4_0), exactly as stored.
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // x[i] = d * qs[i]
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // x[i] = d * ((qs[i] & 15) - 8), x[i + 16] = d * ((qs[i] >> 4) - 8)
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block is 34 bytes on disk");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block is 18 bytes on disk");

// Decodes n elements of dt stored at src into out (f32). n must be a multiple of the block.
Status dequantize_row(DType dt, const void* src, float* out, int64_t n);

}  // namespace kvf
