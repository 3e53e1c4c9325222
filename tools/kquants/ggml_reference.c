// Writes ggml's own decoding of random k-quant blocks, the reference kvforge's decoders are
// held to bit for bit (tests/core/kquants_test.cpp). Built and run by make_reference.sh
// against the llama.cpp source of bench/peers, with -ffp-contract=off: C's one rounding per
// operation, as the reference defines the types.
//
// Output (little-endian): "KQREF1\0\0", then records of u32 ggml type id, u32 block count,
// u32 block bytes, the blocks, then 256 f32 per block: first random blocks of q2_k..q6_k
// and their decoding; then (type id | 0x80000000) bell-shaped values with outliers and
// ggml's reference encoding of them as q4_k and q6_k, the quality kvforge's encoder is held to.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "ggml-quants.h"

enum { kBlocks = 12 };

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {  // xorshift64*
  state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
  return (uint32_t)((state * 0x2545f4914f6cdd1dull) >> 32);
}

// A finite, normal f16 of either sign with magnitude in [2^-14, 2^-4): a plausible scale.
static uint16_t random_scale(void) {
  const uint32_t r = next_u32();
  const uint16_t exponent = (uint16_t)(1 + r % 10), mantissa = (uint16_t)((r >> 8) & 0x3ff);
  return (uint16_t)(((r >> 20) & 1) << 15 | exponent << 10 | mantissa);
}

typedef void (*dequant_fn)(const void* x, float* y, int64_t k);

static void emit(FILE* out, uint32_t type, size_t block_bytes, const size_t* scale_at, int scales, dequant_fn fn) {
  uint8_t blocks[kBlocks * 256];
  float y[kBlocks * 256];
  for (size_t i = 0; i < kBlocks * block_bytes; ++i) blocks[i] = (uint8_t)next_u32();
  for (int b = 0; b < kBlocks; ++b) {
    for (int s = 0; s < scales; ++s) {
      const uint16_t h = random_scale();
      memcpy(blocks + b * block_bytes + scale_at[s], &h, 2);
    }
  }
  fn(blocks, y, kBlocks * 256);
  const uint32_t head[3] = {type, kBlocks, (uint32_t)block_bytes};
  fwrite(head, 4, 3, out);
  fwrite(blocks, 1, kBlocks * block_bytes, out);
  fwrite(y, 4, kBlocks * 256, out);
}

// Roughly normal (a sum of four uniforms), with one value in 64 made five times larger.
static float random_weight(void) {
  float v = 0.0f;
  for (int i = 0; i < 4; ++i) v += (float)next_u32() / 4294967296.0f - 0.5f;
  return next_u32() % 64 == 0 ? 5.0f * v : v;
}

typedef void (*quant_fn)(const float* x, void* y, int64_t k);

static void emit_quantized(FILE* out, uint32_t type, size_t block_bytes, quant_fn fn) {
  float x[kBlocks * 256];
  uint8_t blocks[kBlocks * 256];
  for (int i = 0; i < kBlocks * 256; ++i) x[i] = random_weight();
  fn(x, blocks, kBlocks * 256);
  const uint32_t head[3] = {type | 0x80000000u, kBlocks, (uint32_t)block_bytes};
  fwrite(head, 4, 3, out);
  fwrite(blocks, 1, kBlocks * block_bytes, out);
  fwrite(x, 4, kBlocks * 256, out);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
    return 2;
  }
  FILE* out = fopen(argv[1], "wb");
  if (!out) return 1;
  fwrite("KQREF1\0\0", 1, 8, out);
  // Where each type keeps its f16 scales (d, dmin): the rest of a block is any bytes.
  const size_t q2[] = {80, 82}, q3[] = {108}, q4[] = {0, 2}, q5[] = {0, 2}, q6[] = {208};
  emit(out, GGML_TYPE_Q2_K, sizeof(block_q2_K), q2, 2, (dequant_fn)dequantize_row_q2_K);
  emit(out, GGML_TYPE_Q3_K, sizeof(block_q3_K), q3, 1, (dequant_fn)dequantize_row_q3_K);
  emit(out, GGML_TYPE_Q4_K, sizeof(block_q4_K), q4, 2, (dequant_fn)dequantize_row_q4_K);
  emit(out, GGML_TYPE_Q5_K, sizeof(block_q5_K), q5, 2, (dequant_fn)dequantize_row_q5_K);
  emit(out, GGML_TYPE_Q6_K, sizeof(block_q6_K), q6, 1, (dequant_fn)dequantize_row_q6_K);
  emit_quantized(out, GGML_TYPE_Q4_K, sizeof(block_q4_K), (quant_fn)quantize_row_q4_K_ref);
  emit_quantized(out, GGML_TYPE_Q6_K, sizeof(block_q6_K), (quant_fn)quantize_row_q6_K_ref);
  return fclose(out) == 0 ? 0 : 1;
}
