#include "plan/moe_schedule.h"

#include <algorithm>

namespace kvf::plan {
namespace {

// The direct kernels read 8-element groups of a row (whole blocks of a quantized one).
bool groups_fit(int64_t k, DType dt) { return k % (is_block_quant(dt) ? 32 : 8) == 0; }

}  // namespace

MoeRequest choose_moe_schedule(int64_t rows, int64_t dim, int64_t ffn, int64_t experts, DType gate_dt, DType down_dt,
                               const DeviceCaps& caps) {
  MoeRequest r{rows, dim, ffn, experts, false, experts, 0};
  if (caps.target != Target::kCuda) {
    r.scratch_floats = moe_scratch_floats(rows, dim, ffn);
    return r;
  }
  if (rows <= kGpuMoeDirectRows && groups_fit(dim, gate_dt) && groups_fit(ffn, down_dt)) {
    r.scratch_floats = experts * rows * (ffn + dim);  // every expert's unit and output rows
    return r;
  }
  // Per expert of a pass: its row list, each row's place in it, the units and the outputs.
  r.gathered = true;
  const int64_t per_expert = rows * (ffn + dim + 2) + 1;
  const int64_t budget = std::min(kGpuMoeScratchBudget, caps.max_scratch_bytes) / 4;
  r.experts_per_pass = std::clamp<int64_t>(budget / per_expert, 1, experts);
  r.scratch_floats = r.experts_per_pass * per_expert;
  // The tensor-core tiles read whole 32-element steps of k (and 8-element groups of them).
  r.tensor_cores = caps.half_compute && gate_dt != DType::kF32 && down_dt != DType::kF32 && dim % 32 == 0 && ffn % 32 == 0;
  return r;
}

}  // namespace kvf::plan
