// LoRA terms (the Lora eqn, eval/kernels_fused.cpp's meaning): for each adapter the step's
// rows use, its rows are gathered and run through the adapter's A and Bᵀ as two small
// products (Punica's SGMV, one adapter at a time); rows of adapter 0 (the base model) get y.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace kvf::exec::cpu {

struct LoraArgs {
  const float* y = nullptr;  // [rows, out]: the projection's result
  const float* x = nullptr;  // [rows, in]: its input
  int64_t rows = 0, in = 0, out = 0, rank = 0, adapters = 0;  // adapters: stack entries, 0 included
  DType factors = DType::kF32;  // a's and b's type: f32 or f16
  const void* a = nullptr;      // [adapters, rank, in]
  const void* b = nullptr;      // [adapters, rank, out]: each adapter's B transposed
  const float* s = nullptr;  // [adapters]
  const int32_t* ids = nullptr;  // [rows], each in [0, adapters) (the step's slot check)
  float* result = nullptr;   // [rows, out]; may be y
  float* scratch = nullptr;  // plan::lora_scratch_floats(rows, in, rank, kCpu)
};

void lora(ThreadPool& pool, const LoraArgs& a);

// The second product of one adapter's rows over columns [c0, c1) of its Bᵀ, added to y:
// result[r, c] = y[r, c] + s * (sum over j of ax[i, j] * bt[j, c]) for r = rows[i]: the sum from
// 0 in increasing j, each product fused into it (fma), then fma(sum, s, y). Every body gives
// these bits, so a row's term depends neither on the machine's vector width nor on the other
// rows.
struct LoraUp {
  const float* ax = nullptr;  // [m, rank]
  int64_t m = 0, rank = 0, out = 0, c0 = 0, c1 = 0;
  DType type = DType::kF32;   // bt's: f32 or f16 (widened exactly)
  const void* bt = nullptr;   // [rank, out]
  float s = 0;
  const int32_t* rows = nullptr;  // [m]: each ax row's row of y and result
  const float* y = nullptr;       // [.., out]; may be result
  float* result = nullptr;        // [.., out]
};
void lora_up_portable(const LoraUp& u);
void lora_up_avx2(const LoraUp& u);    // only where linear_isa() is "avx2" or "avx512"
void lora_up_avx512(const LoraUp& u);  // only where linear_isa() is "avx512"

}  // namespace kvf::exec::cpu
