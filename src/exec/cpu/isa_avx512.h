// The AVX-512 vector of the CPU kernels' shared loop templates (lora_up.h, indexer_scores.h):
// 16 floats. Include only from a *_avx512.cpp file, which is built with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kvf::exec::cpu {

struct Avx512 {
  using Vec = __m512;
  static constexpr int64_t kLanes = 16;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float v) { return _mm512_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }  // b where either is NaN
  static float sum(Vec v) { return _mm512_reduce_add_ps(v); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};

}  // namespace kvf::exec::cpu
