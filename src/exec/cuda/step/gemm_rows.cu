// The linear groups of a small batched decode step (plan::kGemmRowsMin to kGemmRowsMax rows,
// f16/bf16 weights) on the tensor cores (gemm_rows.cuh), on plan::gemm_rows_schedule: x is
// rounded to the weights' 16-bit type into the tensor-core scratch first (the group's norm
// applied as it is rounded, as the cuBLASLt path does), the partial sums of split tiles
// follow it there.
#include "exec/cuda/device_props.h"
#include "exec/cuda/step/gemm_rows.cuh"
#include "plan/gemm_rows_schedule.h"

namespace kvf::exec::cuda::step {
namespace {

using gemm_rows_detail::Args;

// The step's shape: 4 warps of 2 tiles of 8 weight rows, 2 stages in flight, one 16-row tile
// of x (the rows the step gives it fit one).
constexpr int kTileWarps = 4, kWarpTiles = 2, kDepth = 2, kXTiles = 1;
static_assert(kTileWarps * kWarpTiles * 8 == plan::kGemmRowsTileRows);
static_assert(plan::kGemmRowsMax <= 16 * kXTiles);

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Weight rows the group streams: its columns, and with a glu the up rows too.
int64_t weight_rows(const LinearGroup& g) { return (g.glu ? 2 : 1) * gemv16_detail::group_columns(g); }

plan::GemmRowsSchedule schedule(int64_t k, const LinearGroup& g) {
  return plan::gemm_rows_schedule(weight_rows(g), k, detail::sm_count());
}

template <bool F16>
void launch(const Args& a, bool glu, cudaStream_t s) {
  if (glu) gemm_rows_detail::launch<kXTiles, kWarpTiles, kTileWarps, kDepth, F16, true>(a, s, true);
  else gemm_rows_detail::launch<kXTiles, kWarpTiles, kTileWarps, kDepth, F16, false>(a, s, true);
}

}  // namespace

bool gemm_rows_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  if ((w_dt != DType::kF16 && w_dt != DType::kBF16) || m < plan::kGemmRowsMin || m > plan::kGemmRowsMax) return false;
  if (k % gemm_rows_detail::kSlice != 0 || g.parts < 1 || (g.glu && g.parts != 2)) return false;
  if (g.residual_out != nullptr && g.parts != 1) return false;
  return !g.glu || g.part[0].n == g.part[1].n;
}

GemmRowsScratch gemm_rows_scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  if (!gemm_rows_fits(m, k, w_dt, g)) return {};
  const plan::GemmRowsSchedule s = schedule(k, g);
  GemmRowsScratch out;
  out.bytes = aligned(m * k * 2);
  if (s.splits > 1) out.bytes += 4 * gemm_rows_detail::partial_floats(s.tiles, s.splits, kXTiles, kWarpTiles, kTileWarps);
  out.counters = s.tiles;
  return out;
}

void round_group_x(const float* x, int64_t m, int64_t k, DType half, const LinearGroup& g, void* out, const Launch& l) {
  // Without a norm, the grid-stride cast: a block a row leaves a k = 5632 row's rounding 3 us
  // slower with 8 rows.
  if (g.norm_w != nullptr) rmsnorm_to_half(x, g.norm_w, out, half, m, k, g.norm_eps, g.norm_unit_offset, l);
  else cast(DType::kF32, half, x, out, m * k, l);
}

bool linear_group_rows(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (l.tc.handle == nullptr) return false;
  const GemmRowsScratch need = gemm_rows_scratch(m, k, w_dt, g);
  if (need.bytes == 0 || l.tc.scratch_bytes < need.bytes || l.tc.counter_count < need.counters) return false;
  if (g.x16 == nullptr) round_group_x(x, m, k, w_dt, g, l.tc.scratch, l);
  Args a;
  a.x16 = g.x16 != nullptr ? g.x16 : l.tc.scratch;
  a.m = m;
  a.k = k;
  a.rows = gemv16_detail::group_columns(g);
  a.splits = schedule(k, g).splits;
  a.partials = reinterpret_cast<float*>(static_cast<uint8_t*>(l.tc.scratch) + aligned(m * k * 2));
  a.counters = l.tc.counters;
  a.g = g;
  if (w_dt == DType::kF16) launch<true>(a, g.glu, stream_of(l));
  else launch<false>(a, g.glu, stream_of(l));
  return true;
}

}  // namespace kvf::exec::cuda::step
