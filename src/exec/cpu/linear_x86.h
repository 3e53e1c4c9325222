// Private to linear_avx2.cpp and linear_avx512.cpp: the x86 pieces both bodies use, after
// <immintrin.h>. Each body is compiled with its own instruction-set flags, so these live in
// an unnamed namespace: every body gets its own copy, built for its flags (one shared inline
// definition could hand the AVX-2 body AVX-512 code).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

}  // namespace
}  // namespace kvf::exec::cpu::detail
