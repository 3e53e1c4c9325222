// Routed experts (the Moe eqn, eval/kernels_fused.cpp's meaning): each expert's gated unit
// runs on the rows that picked it, not on every row, through the same linear and glu
// kernels the chain's eqns run, so each picked term has the chain's bits.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "exec/cpu/linear.h"
#include "ir/op_kind.h"

namespace kvf::exec::cpu {

struct MoeArgs {
  const float* x = nullptr;        // [rows, dim]
  const float* weights = nullptr;  // [rows, experts]: 0 for an expert the row did not pick
  int64_t rows = 0, dim = 0, ffn = 0;
  std::span<const WeightView> gate, up, down;  // one of each per expert
  ir::GluAct act = ir::GluAct::kSilu;
  float* out = nullptr;      // [rows, dim]
  float* scratch = nullptr;  // plan::moe_scratch_floats(rows, dim, ffn)
};

void moe(ThreadPool& pool, const MoeArgs& a);

}  // namespace kvf::exec::cpu
