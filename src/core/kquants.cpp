// ggml's k-quant layouts: the chunk view the linear kernels compute from, and exact decoding.
#include "core/kquants.h"

#include <cstring>

namespace kvf {
namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_bits_to_f32(h);
}

// q3_k's sixteen 6-bit scales: the low nibbles in bytes 0..7 (scales 0..7 low, 8..15 high
// nibble), the top two bits of scale s in bits 2·(s / 4) of byte 8 + s % 4.
int q3_k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

void kquant_chunk(DType t, const uint8_t* blk, int c, KQuantChunk& out) {
  if (t == DType::kQ4_K || t == DType::kQ5_K) {
    const bool five = t == DType::kQ5_K;
    const uint8_t* qs = blk + (five ? 48 : 16) + 32 * (c / 2);
    const int shift = 4 * (c % 2);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[l] >> shift) & 15;
      if (five) q |= ((blk[16 + l] >> c) & 1) << 4;
      out.q[l] = static_cast<uint8_t>(q);
    }
    int sc, m;
    kquant_scale_min(blk + 4, c, sc, m);
    out.dsc = half_at(blk) * static_cast<float>(sc);
    out.dmn = half_at(blk + 2) * static_cast<float>(m);
    return;
  }
  // q6_k: chunk c is weights 32·cc .. 32·cc + 31 of half h (128 weights each): the low bits
  // from ql[64h + l] (cc 0, 2: low, high nibble) or ql[64h + 32 + l] (cc 1, 3), the high two
  // from bits 2·cc of qh[32h + l]; its sub-blocks of 16 take scales 8h + 2cc and 8h + 2cc + 1.
  const int h = c / 4, cc = c % 4;
  const uint8_t* ql = blk + 64 * h + 32 * (cc % 2);
  const uint8_t* qh = blk + 128 + 32 * h;
  for (int l = 0; l < 32; ++l) {
    const int low = (ql[l] >> (4 * (cc / 2))) & 15;
    out.q[l] = static_cast<uint8_t>(low | (((qh[l] >> (2 * cc)) & 3) << 4));
  }
  const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
  out.sc[0] = scales[8 * h + 2 * cc];
  out.sc[1] = scales[8 * h + 2 * cc + 1];
  out.d = half_at(blk + 208);
}

namespace {
// q4_k and q5_k: w = dsc·q − dmn, one rounding per operation.
void dequantize_with_mins(DType t, const uint8_t* src, float* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    for (int c = 0; c < kKQuantChunks; ++c) {
      KQuantChunk ch;
      kquant_chunk(t, src + b * block_bytes(t), c, ch);
      for (int l = 0; l < 32; ++l) out[32 * c + l] = ch.dsc * static_cast<float>(ch.q[l]) - ch.dmn;
    }
    out += kKQuantElems;
  }
}
}  // namespace

void dequantize_q4_k(const uint8_t* src, float* out, int64_t blocks) { dequantize_with_mins(DType::kQ4_K, src, out, blocks); }
void dequantize_q5_k(const uint8_t* src, float* out, int64_t blocks) { dequantize_with_mins(DType::kQ5_K, src, out, blocks); }

void dequantize_q6_k(const uint8_t* src, float* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    for (int c = 0; c < kKQuantChunks; ++c) {
      KQuantChunk ch;
      kquant_chunk(DType::kQ6_K, src + b * sizeof(BlockQ6_K), c, ch);
      for (int l = 0; l < 32; ++l) {
        out[32 * c + l] = ch.d * static_cast<float>(ch.sc[l / 16]) * static_cast<float>(ch.q[l] - 32);
      }
    }
    out += kKQuantElems;
  }
}

// Sub-block s of 16 weights (s = 0..15): its quants are the 2-bit field 2·((s / 2) % 4) of
// bytes qs[32·(s / 8) + 16·(s % 2) + l].
void dequantize_q2_k(const uint8_t* src, float* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = src + b * sizeof(BlockQ2_K);
    const float d = half_at(blk + 80), dmin = half_at(blk + 82);
    for (int s = 0; s < 16; ++s) {
      const uint8_t sc = blk[s];
      const float dl = d * static_cast<float>(sc & 15), ml = dmin * static_cast<float>(sc >> 4);
      const uint8_t* qs = blk + 16 + 32 * (s / 8) + 16 * (s % 2);
      const int shift = 2 * ((s / 2) % 4);
      for (int l = 0; l < 16; ++l) out[16 * s + l] = dl * static_cast<float>((qs[l] >> shift) & 3) - ml;
    }
    out += kKQuantElems;
  }
}

// As q2_k's sub-block walk, with the third bit of weight 16·s + l at bit s / 2 of
// hmask[16·(s % 2) + l] (a clear bit subtracts 4).
void dequantize_q3_k(const uint8_t* src, float* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = src + b * sizeof(BlockQ3_K);
    const float d = half_at(blk + 108);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3_k_scale(blk + 96, s));
      const uint8_t* qs = blk + 32 + 32 * (s / 8) + 16 * (s % 2);
      const uint8_t* hm = blk + 16 * (s % 2);
      const int shift = 2 * ((s / 2) % 4);
      for (int l = 0; l < 16; ++l) {
        const int q = ((qs[l] >> shift) & 3) - ((hm[l] >> (s / 2)) & 1 ? 0 : 4);
        out[16 * s + l] = dl * static_cast<float>(q);
      }
    }
    out += kKQuantElems;
  }
}

}  // namespace kvf
