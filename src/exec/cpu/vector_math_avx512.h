// Vector math for the AVX-512 kernels (include only from *_avx512.cpp files, which are built
// with AVX-512 flags): exp and tanh over 16 f32 lanes.
#pragma once

// GCC 12's AVX-512 intrinsics start from a self-initialized _mm512_undefined_ps() and warn
// about it once inlined (GCC bug 105593, fixed in 13); the warning is about their code.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

namespace kvf::exec::cpu {

// exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln 2 / 2, e^r by its Taylor series to
// r^7 (error ~5e-9, under the f32 rounding). Below -150 the result is exactly 0, so -inf
// scores give weight 0; NaN stays NaN (max/min return their second operand on NaN).
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-150.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln 2, high bits: n * it is exact
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606820309417e-06f), r);    // ln 2, the rest
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// tanh(y) = sign(y) (1 - e) / (1 + e) with e = exp(-2|y|) <= 1, so nothing overflows.
inline __m512 tanh_ps(__m512 y) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 e = exp_ps(_mm512_mul_ps(_mm512_andnot_ps(sign, y), _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  return _mm512_or_ps(t, _mm512_and_ps(sign, y));
}

}  // namespace kvf::exec::cpu
