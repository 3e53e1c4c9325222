// LoRA terms (the Lora eqn, eval/kernels_fused.cpp's meaning): for each adapter the step's
// rows use, its rows are gathered and run through the adapter's A and B as two small
// products (Punica's SGMV, one adapter at a time); rows of adapter 0 (the base model) get y.
#pragma once

#include "core/thread_pool.h"

namespace kvf::exec::cpu {

struct LoraArgs {
  const float* y = nullptr;  // [rows, out]: the projection's result
  const float* x = nullptr;  // [rows, in]: its input
  int64_t rows = 0, in = 0, out = 0, rank = 0, adapters = 0;  // adapters: stack entries, 0 included
  const float* a = nullptr;  // [adapters, rank, in]
  const float* b = nullptr;  // [adapters, out, rank]
  const float* s = nullptr;  // [adapters]
  const int32_t* ids = nullptr;  // [rows], each in [0, adapters) (the step's slot check)
  float* result = nullptr;   // [rows, out]; may be y
  float* scratch = nullptr;  // plan::lora_scratch_floats(rows, in, out, rank, kCpu)
};

void lora(ThreadPool& pool, const LoraArgs& a);

}  // namespace kvf::exec::cpu
