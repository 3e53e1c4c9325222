// How a device runs a Moe eqn (the routed experts' sum): on the CPU each expert in turn over
// the rows that picked it (exec/cpu/moe.cpp); on a GPU in one of two forms that read only the
// picked experts' weights without the host learning which they are:
//   - direct (decode, up to kGpuMoeDirectRows rows): every expert's blocks look at the
//     routing weights first and leave at once when no row picked their expert; the rest run
//     the expert's products over every row (the weights are read once either way);
//   - gathered (any row count): a routing launch lists each expert's rows, and the experts'
//     products run as one grouped GEMM over those lists, experts_per_pass experts at a time
//     so that the scratch (worst case: every row picks every expert) stays bounded.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "plan/device_caps.h"

namespace kvf::plan {

inline constexpr int64_t kGpuMoeDirectRows = 8;
// A gathered pass's scratch stays under this (and the device's max_scratch_bytes).
inline constexpr int64_t kGpuMoeScratchBudget = int64_t{256} << 20;

struct MoeRequest {
  int64_t rows = 0, dim = 0, ffn = 0, experts = 0;
  bool gathered = false;         // GPU: routed lists and a grouped GEMM (else direct)
  int64_t experts_per_pass = 0;  // GPU gathered: experts each pass runs
  // GPU gathered: the products on the tensor cores, from x rounded to the weights' 16-bit type
  // (as the linears' tensor-core path: caps.half_compute and 16-bit or quantized weights).
  bool tensor_cores = false;
  int64_t scratch_floats = 0;    // plan-local, in the layout the executor's kernel expects
};

// `gate_dt` and `down_dt`: the stored types of the gate/up and the down weights.
MoeRequest choose_moe_schedule(int64_t rows, int64_t dim, int64_t ffn, int64_t experts, DType gate_dt, DType down_dt,
                               const DeviceCaps& caps);

// The scratch of the CPU's layout: the picking rows' indices, their x, two [rows, ffn]
// products and the units' outputs.
inline int64_t moe_scratch_floats(int64_t rows, int64_t dim, int64_t ffn) { return rows * (1 + 2 * dim + 2 * ffn); }

}  // namespace kvf::plan
