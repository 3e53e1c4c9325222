// The LoRA up-product's AVX2 body (lora.h's LoraUp): lora_avx512.cpp's loops over 8 columns a
// vector. Built with AVX2 flags only; lora.cpp calls it when the CPU has them.
#include <immintrin.h>

#include <algorithm>

#include "exec/cpu/lora.h"

namespace kvf::exec::cpu {
namespace {

// Rows [i, i + R) over the 8 (or fewer: `keep`'s lanes) columns at c.
template <int R>
void rows_at(const LoraUp& u, int64_t i, int64_t c, __m256i keep) {
  __m256 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t j = 0; j < u.rank; ++j) {
    const __m256 b = _mm256_maskload_ps(u.bt + j * u.out + c, keep);
    for (int k = 0; k < R; ++k) acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(u.ax[(i + k) * u.rank + j]), b, acc[k]);
  }
  const __m256 s = _mm256_set1_ps(u.s);
  for (int k = 0; k < R; ++k) {
    float* o = u.result + u.rows[i + k] * u.out + c;
    _mm256_maskstore_ps(o, keep, _mm256_fmadd_ps(acc[k], s, _mm256_maskload_ps(o, keep)));
  }
}

}  // namespace

void lora_up_avx2(const LoraUp& u) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t c = u.c0; c < u.c1; c += 8) {
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(8, u.c1 - c))), lane);
    int64_t i = 0;
    for (; i + 4 <= u.m; i += 4) rows_at<4>(u, i, c, keep);
    for (; i < u.m; ++i) rows_at<1>(u, i, c, keep);
  }
}

}  // namespace kvf::exec::cpu
