// merge_attention_partials' kernel (attention.h): one warp per query row. Its parts are few
// (ranks, splits), so each lane recomputes their weights for the columns it owns rather than
// sharing them: the row's bytes, parts x dv floats, are what the launch costs.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "exec/cuda/decode_launch.h"

namespace kvf::exec::cuda::detail {
namespace {

constexpr int kWarpsPerBlock = 4;

// Part r's weight in its row: e^(lse_r - m), 0 for a part that saw no key.
__device__ inline float part_weight(float lse, float m) { return lse == -INFINITY ? 0.0f : expf(lse - m); }

__global__ void merge_partials_kernel(PartialsMergeParams p) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= p.rows) return;
  float m = -INFINITY;
  for (int r = lane; r < p.parts; r += 32) m = fmaxf(m, p.lse[static_cast<size_t>(r) * p.rows + row]);
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  float l = 0.0f;
  if (m != -INFINITY) {
    for (int r = 0; r < p.parts; ++r) l += part_weight(p.lse[static_cast<size_t>(r) * p.rows + row], m);
  }
  for (int c = lane; c < p.dv; c += 32) {
    float s = 0.0f;
    for (int r = 0; r < p.parts && l > 0.0f; ++r) {
      const size_t at = static_cast<size_t>(r) * p.rows + row;
      const float w = part_weight(p.lse[at], m);
      if (w != 0.0f) s += w * p.o[at * p.dv + c];  // an empty part's o may hold anything
    }
    p.out[static_cast<size_t>(row) * p.dv + c] = l > 0.0f ? s / l : 0.0f;
  }
  if (p.out_lse != nullptr && lane == 0) p.out_lse[row] = l > 0.0f ? m + logf(l) : -INFINITY;
}

}  // namespace

int launch_merge_partials(const PartialsMergeParams& p, void* stream) {
  const unsigned blocks = static_cast<unsigned>((p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  merge_partials_kernel<<<blocks, kWarpsPerBlock * 32, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvf::exec::cuda::detail
