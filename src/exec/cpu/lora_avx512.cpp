// The LoRA up-product's AVX-512 body (lora_up.h's loops, 16 columns a vector). Built with
// AVX-512 flags only; lora.cpp calls it when the CPU has them.
// GCC 12's _mm512_cvtph_ps trips -W(maybe-)uninitialized on the header's own placeholder once
// inlined (GCC PR 105593); nothing here is read uninitialized.
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include "exec/cpu/lora_up.h"

namespace kvf::exec::cpu {
namespace {

struct Avx512 {
  using Vec = __m512;
  static constexpr int64_t kLanes = 16;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float v) { return _mm512_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void lora_up_avx512(const LoraUp& u) { detail::lora_up_with<Avx512>(u); }

}  // namespace kvf::exec::cpu
