// The AVX2 vector of the CPU kernels' shared loop templates (lora_up.h, indexer_scores.h):
// 8 floats. Include only from a *_avx2.cpp file, which is built with AVX2 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kvf::exec::cpu {

struct Avx2 {
  using Vec = __m256;
  static constexpr int64_t kLanes = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float v) { return _mm256_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }  // b where either is NaN
  static float sum(Vec v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
  }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
};

}  // namespace kvf::exec::cpu
