// The gated units' AVX-512 body: act(gate) * up over 16 lanes, the exponential of
// vector_math_avx512.h instead of a libm call per element (the silu was a tenth of a
// prefill's time). Built with AVX-512 flags only; kernels_rows.cpp calls it when the CPU
// has them.
#include "exec/cpu/kernels_rows.h"
#include "exec/cpu/vector_math_avx512.h"

namespace kvf::exec::cpu {
namespace {

// silu(x) = x / (1 + exp(-x)); past |x| ~ 88 the clamped exponential still gives x or -0.
inline __m512 silu_ps(__m512 x) {
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// gelu_tanh(x) = x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
inline __m512 gelu_tanh_ps(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 y = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), tanh_ps(y)));
}

template <ir::GluAct A>
void glu_lanes(const float* g, const float* u, float* o, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 m = i1 - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (i1 - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 a = A == ir::GluAct::kSilu ? silu_ps(x) : gelu_tanh_ps(x);
    _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, u + i)));
  }
}

}  // namespace

bool glu_avx512(ir::GluAct act, const float* gate, const float* up, float* out, int64_t i0, int64_t i1) {
  switch (act) {
    case ir::GluAct::kSilu: glu_lanes<ir::GluAct::kSilu>(gate, up, out, i0, i1); return true;
    case ir::GluAct::kGeluTanh: glu_lanes<ir::GluAct::kGeluTanh>(gate, up, out, i0, i1); return true;
    default: return false;  // erf: the portable loop
  }
}

}  // namespace kvf::exec::cpu
