// The LoRA up-product's AVX-512 body (lora.h's LoraUp): 16 output columns a vector, four rows
// sharing each load of Bᵀ. Built with AVX-512 flags only; lora.cpp calls it when the CPU has
// them.
#include <immintrin.h>

#include "exec/cpu/lora.h"

namespace kvf::exec::cpu {
namespace {

// Rows [i, i + R) over the 16 (or fewer, `keep`) columns at c.
template <int R>
void rows_at(const LoraUp& u, int64_t i, int64_t c, __mmask16 keep) {
  __m512 acc[R];
  for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t j = 0; j < u.rank; ++j) {
    const __m512 b = _mm512_maskz_loadu_ps(keep, u.bt + j * u.out + c);
    for (int k = 0; k < R; ++k) {
      acc[k] = _mm512_fmadd_ps(_mm512_set1_ps(u.ax[(i + k) * u.rank + j]), b, acc[k]);
    }
  }
  const __m512 s = _mm512_set1_ps(u.s);
  for (int k = 0; k < R; ++k) {
    float* o = u.result + u.rows[i + k] * u.out + c;
    _mm512_mask_storeu_ps(o, keep, _mm512_fmadd_ps(acc[k], s, _mm512_maskz_loadu_ps(keep, o)));
  }
}

}  // namespace

void lora_up_avx512(const LoraUp& u) {
  for (int64_t c = u.c0; c < u.c1; c += 16) {
    const __mmask16 keep = u.c1 - c >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (u.c1 - c)) - 1);
    int64_t i = 0;
    for (; i + 4 <= u.m; i += 4) rows_at<4>(u, i, c, keep);
    for (; i < u.m; ++i) rows_at<1>(u, i, c, keep);
  }
}

}  // namespace kvf::exec::cpu
