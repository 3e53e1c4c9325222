// Private to linear_avx2.cpp and linear_avx512.cpp: the x86 pieces both bodies use, after
// <immintrin.h>. Each body is compiled with its own instruction-set flags, so these live in
// an unnamed namespace: every body gets its own copy, built for its flags (one shared inline
// definition could hand the AVX-2 body AVX-512 code).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/kquants.h"

namespace kvf::exec::cpu::detail {
namespace {

// The 16 bits at p into lane `lane` (0..3) of v. A vector insert: four scalar conversions
// stored to an array and read back as one vector stall store forwarding.
inline __m128i insert_u16(__m128i v, const uint8_t* p, int lane) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  switch (lane) {
    case 0: return _mm_insert_epi16(v, h, 0);
    case 1: return _mm_insert_epi16(v, h, 1);
    case 2: return _mm_insert_epi16(v, h, 2);
    default: return _mm_insert_epi16(v, h, 3);
  }
}

// The integer dots of four rows' blocks (8 lanes each), summed: the exact block dots in
// order. Unpacks and adds rather than vphaddd, which is microcoded on some cores (it was half
// of a q8_0 GEMV's time on Zen 5).
// The same dots in two halves: lanes 0-3 of each row (the block's first 16 elements) in the
// low 128 bits, lanes 4-7 in the high.
inline __m256i half_dots(__m256i d0, __m256i d1, __m256i d2, __m256i d3) {
  // Per 128-bit half: [d0, d1, d0, d1] and [d2, d3, d2, d3] partial sums, then [d0, d1, d2, d3].
  const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(d0, d1), _mm256_unpackhi_epi32(d0, d1));
  const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(d2, d3), _mm256_unpackhi_epi32(d2, d3));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

inline __m128i block_dots(__m256i d0, __m256i d1, __m256i d2, __m256i d3) {
  const __m256i s = half_dots(d0, d1, d2, d3);
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// ---------------------------------------------------------------- k-quants

template <DType DT>
constexpr bool kKQuant = DT == DType::kQ4_K || DT == DType::kQ5_K || DT == DType::kQ6_K;

template <DType DT>
constexpr int64_t kKBytes = DT == DType::kQ4_K ? sizeof(BlockQ4_K) : DT == DType::kQ5_K ? sizeof(BlockQ5_K)
                                                                                         : sizeof(BlockQ6_K);

// A q4_k/q5_k super-block's eight 6-bit scales then eight mins as bytes: the 12 packed bytes
// unpacked four at a time with 32-bit masks (kquant_scale_min's rule).
inline __m128i kquant_scale_bytes(const uint8_t* blk) {
  uint32_t a, b, c;
  std::memcpy(&a, blk + 4, 4);
  std::memcpy(&b, blk + 8, 4);
  std::memcpy(&c, blk + 12, 4);
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
  return _mm_setr_epi32(static_cast<int>(a & 0x3f3f3f3fu), static_cast<int>(sc_hi), static_cast<int>(b & 0x3f3f3f3fu),
                        static_cast<int>(mn_hi));
}

// Four q6_k rows' sixteen scales as [scale][row]: bytes, then byte pairs interleaved.
inline void q6_scales_by_row(const uint8_t* const (&blk)[4], int8_t (&out)[16][4]) {
  __m128i sc[4];
  for (int r = 0; r < 4; ++r) sc[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r] + 192));
  const __m128i a = _mm_unpacklo_epi8(sc[0], sc[1]), b = _mm_unpackhi_epi8(sc[0], sc[1]);
  const __m128i c = _mm_unpacklo_epi8(sc[2], sc[3]), d = _mm_unpackhi_epi8(sc[2], sc[3]);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out[0]), _mm_unpacklo_epi16(a, c));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out[4]), _mm_unpackhi_epi16(a, c));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out[8]), _mm_unpacklo_epi16(b, d));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out[12]), _mm_unpackhi_epi16(b, d));
}

// Chunk C's 32 unsigned quants (core/kquants.h); qh: q5_k's high bits, q6_k's at blk + 128 + 32 h.
template <DType DT, int C>
inline __m256i kquant_quants(const uint8_t* blk, __m256i qh) {
  const __m256i m4 = _mm256_set1_epi8(15);
  if constexpr (DT == DType::kQ6_K) {
    constexpr int h = C / 4, cc = C % 4;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32 * (cc % 2)));
    const __m256i low = _mm256_and_si256(cc / 2 ? _mm256_srli_epi16(v, 4) : v, m4);
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * cc), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
  } else {
    constexpr int64_t base = DT == DType::kQ5_K ? 48 : 16;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + base + 32 * (C / 2)));
    __m256i q = _mm256_and_si256(C % 2 ? _mm256_srli_epi16(v, 4) : v, m4);
    if constexpr (DT == DType::kQ5_K) {
      q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, C), _mm256_set1_epi8(1)), 4));
    }
    return q;
  }
}

// Super-block sb of four rows, its lines prefetched `ahead` bytes on (the bodies' row-quad
// rule); for q6_k also the rows' d and their scales by row.
template <DType DT>
struct KQuadBlock {
  const uint8_t* blk[4];
  __m128 d6 = _mm_setzero_ps();
  alignas(16) int8_t sc_by_row[16][4] = {};

  KQuadBlock(const uint8_t* const (&rows)[4], int64_t sb, int64_t ahead) {
    for (int r = 0; r < 4; ++r) {
      blk[r] = rows[r] + sb * kKBytes<DT>;
      for (int64_t l = 0; l < kKBytes<DT>; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk[r] + l + ahead), _MM_HINT_T0);
    }
    if constexpr (DT == DType::kQ6_K) {
      __m128i dw16 = _mm_setzero_si128();
      for (int r = 0; r < 4; ++r) dw16 = insert_u16(dw16, blk[r] + 208, r);
      d6 = _mm_cvtph_ps(dw16);
      q6_scales_by_row(blk, sc_by_row);
    }
  }
};

// The 32 high-bit bytes chunk C reads: q5_k's for the whole block, q6_k's per half.
template <DType DT, int C>
inline __m256i kquant_high_bits(const uint8_t* blk) {
  if constexpr (DT == DType::kQ5_K) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
  if constexpr (DT == DType::kQ6_K) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * (C / 4)));
  return _mm256_setzero_si256();
}

}  // namespace
}  // namespace kvf::exec::cpu::detail
