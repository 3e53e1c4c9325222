// The LoRA up-product's loops (lora.h's LoraUp), private to the lora kernels: the column at a
// time form is the portable body and the vector bodies' tail; the vector form takes an `Isa`
// (lora_avx2.cpp, lora_avx512.cpp) with a vector of kLanes floats: zero, set1, fma, store,
// and load from f32 or f16 bits. Each column's sum is the same fma chain in every form.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "exec/cpu/lora.h"

namespace kvf::exec::cpu::detail {

inline float factor(float v) { return v; }
inline float factor(uint16_t h) { return f16_bits_to_f32(h); }

// Columns [c0, c1), one at a time.
template <class T>
void lora_up_columns(const LoraUp& u, int64_t c0, int64_t c1) {
  const T* bt = static_cast<const T*>(u.bt);
  for (int64_t i = 0; i < u.m; ++i) {
    const float* ax = u.ax + i * u.rank;
    const float* y = u.y + u.rows[i] * u.out;
    float* o = u.result + u.rows[i] * u.out;
    for (int64_t c = c0; c < c1; ++c) {
      float acc = 0;
      for (int64_t j = 0; j < u.rank; ++j) acc = std::fma(ax[j], factor(bt[j * u.out + c]), acc);
      o[c] = std::fma(acc, u.s, y[c]);
    }
  }
}

// Rows [i, i + R) over the kLanes columns at c: R rows share each load of Bᵀ.
template <class Isa, int R, class T>
void lora_up_rows(const LoraUp& u, int64_t i, int64_t c) {
  const T* bt = static_cast<const T*>(u.bt);
  // The k loops unrolled, so acc stays in registers (rolled, GCC keeps it on the stack and
  // every fma waits on a store).
  typename Isa::Vec acc[R];
#pragma GCC unroll 8
  for (int k = 0; k < R; ++k) acc[k] = Isa::zero();
  const float* ax = u.ax + i * u.rank;
  for (int64_t j = 0; j < u.rank; ++j) {
    const typename Isa::Vec b = Isa::load(bt + j * u.out + c);
#pragma GCC unroll 8
    for (int k = 0; k < R; ++k) acc[k] = Isa::fma(Isa::set1(ax[k * u.rank + j]), b, acc[k]);
  }
  const typename Isa::Vec s = Isa::set1(u.s);
#pragma GCC unroll 8
  for (int k = 0; k < R; ++k) {
    const int64_t at = u.rows[i + k] * u.out + c;
    Isa::store(u.result + at, Isa::fma(acc[k], s, Isa::load(u.y + at)));
  }
}

template <class Isa, class T>
void lora_up_vectors(const LoraUp& u) {
  int64_t c = u.c0;
  for (; c + Isa::kLanes <= u.c1; c += Isa::kLanes) {
    int64_t i = 0;
    for (; i + 4 <= u.m; i += 4) lora_up_rows<Isa, 4, T>(u, i, c);
    for (; i < u.m; ++i) lora_up_rows<Isa, 1, T>(u, i, c);
  }
  lora_up_columns<T>(u, c, u.c1);
}

template <class Isa>
void lora_up_with(const LoraUp& u) {
  if (u.type == DType::kF16) {
    lora_up_vectors<Isa, uint16_t>(u);
  } else {
    lora_up_vectors<Isa, float>(u);
  }
}

}  // namespace kvf::exec::cpu::detail
