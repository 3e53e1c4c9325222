// The LoRA up-product's AVX2 body (lora_up.h's loops, 8 columns a vector). Built with AVX2
// flags only; lora.cpp calls it when the CPU has them.
#include <immintrin.h>

#include "exec/cpu/lora_up.h"

namespace kvf::exec::cpu {
namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr int64_t kLanes = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float v) { return _mm256_set1_ps(v); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

void lora_up_avx2(const LoraUp& u) { detail::lora_up_with<Avx2>(u); }

}  // namespace kvf::exec::cpu
