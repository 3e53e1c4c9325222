// ggml's k-quant super-blocks (256 weights each) exactly as GGUF stores them, the unpacking
// of their packed scales, and their exact decoding to f32.
//
// The three types kvforge computes on directly are read in 32-weight chunks, the block of
// the quantized x they meet in the linear kernels: chunk c of a super-block is weights
// 32c .. 32c + 31, whose unsigned quants (q4_k 0..15, q5_k 0..31, q6_k 0..63) and scales
// kquant_chunk() returns. q2_k and q3_k are only decoded (at load).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kvf {

inline constexpr int64_t kKQuantElems = 256;  // weights per super-block (ggml's QK_K)
inline constexpr int64_t kKQuantChunks = 8;   // 32-weight chunks per super-block

// w = d·sc_j·q - dmin·m_j over 8 sub-blocks j of 32, (sc_j, m_j) 6 bits each, packed in scales.
struct BlockQ4_K {
  uint16_t d, dmin;  // f16
  uint8_t scales[12];
  uint8_t qs[128];   // sub-blocks 2p and 2p + 1 in the low and high nibbles of qs[32p .. 32p + 31]
};
// As q4_k, with the fifth bit of weight l of sub-block j at bit j of qh[l].
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// w = d·sc_s·(q - 32) over 16 sub-blocks s of 16 with signed 8-bit scales; the low 4 bits of
// q in ql, the high 2 in qh (layout: kquant_chunk in kquants.cpp).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Decoded only: w = d·(sc & 15)·q - dmin·(sc >> 4) over 16 sub-blocks of 16, 2-bit q.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// Decoded only: w = d·(sc_s - 32)·(q - 4·(1 - hbit)) over 16 sub-blocks of 16, 6-bit sc_s.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);

// Sub-block j's (scale, min) of a q4_k/q5_k block's 12 packed scale bytes: j < 4 in the low
// 6 bits of bytes j and j + 4; j >= 4 split between a nibble of byte j + 4 and the top two
// bits of bytes j - 4 and j.
inline void kquant_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// One 32-weight chunk, in element order: the unsigned quants and what scales them.
//   q4_k, q5_k: w = dsc·q - dmn       (dsc = d·sc_j, dmn = dmin·m_j: exact in f32)
//   q6_k:       w = d·sc[h]·(q - 32)  (h = 0 for weights 0..15 of the chunk, 1 for 16..31)
struct KQuantChunk {
  uint8_t q[32];
  float dsc = 0, dmn = 0;  // q4_k, q5_k
  float d = 0;             // q6_k
  int32_t sc[2] = {0, 0};  // q6_k
};
// Chunk c (0..7) of the super-block at blk; t is kQ4_K, kQ5_K or kQ6_K.
void kquant_chunk(DType t, const uint8_t* blk, int c, KQuantChunk& out);

// Exact decoding of whole super-blocks, element by element as ggml's reference defines
// each type (one rounding per product, no fused multiply-add).
void dequantize_q2_k(const uint8_t* src, float* out, int64_t blocks);
void dequantize_q3_k(const uint8_t* src, float* out, int64_t blocks);
void dequantize_q4_k(const uint8_t* src, float* out, int64_t blocks);
void dequantize_q5_k(const uint8_t* src, float* out, int64_t blocks);
void dequantize_q6_k(const uint8_t* src, float* out, int64_t blocks);

// Encoding (core/kquant_encode.cpp), for `kvforge convert`: `blocks` super-blocks of 256
// values each. Per sub-block, the scale (and q4_k's min) that least-squares fits the values
// from a min/max start, then the super-block's 6- or 8-bit scale codes, then the quants
// rounded against the scales as stored. Finite input only.
void quantize_q4_k(const float* x, uint8_t* out, int64_t blocks);
void quantize_q6_k(const float* x, uint8_t* out, int64_t blocks);

}  // namespace kvf
