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

// Part r's weight in its row, 2^(m_r − M)·l_r: 0 for a part that saw no key (l = 0).
__device__ inline float part_weight(const float* ml, float big_m) {
  return ml[1] > 0.0f ? exp2f(ml[0] - big_m) * ml[1] : 0.0f;
}

__global__ void merge_partials_kernel(PartialsMergeParams p) {
  const int row = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= p.rows) return;
  auto ml = [&](int r) { return p.ml + static_cast<size_t>(r) * p.ml_stride + 2 * static_cast<size_t>(row); };
  float big_m = -INFINITY;
  for (int r = lane; r < p.parts; r += 32) {
    if (ml(r)[1] > 0.0f) big_m = fmaxf(big_m, ml(r)[0]);
  }
  for (int off = 16; off > 0; off /= 2) big_m = fmaxf(big_m, __shfl_xor_sync(0xffffffffu, big_m, off));
  float l = 0.0f;
  for (int r = 0; r < p.parts; ++r) l += part_weight(ml(r), big_m);
  for (int c = lane; c < p.dv; c += 32) {
    float s = 0.0f;
    for (int r = 0; r < p.parts && l > 0.0f; ++r) {
      const float w = part_weight(ml(r), big_m);
      if (w != 0.0f) s += w * p.o[static_cast<size_t>(r) * p.o_stride + static_cast<size_t>(row) * p.dv + c];  // an empty part's o may hold anything
    }
    p.out[static_cast<size_t>(row) * p.dv + c] = l > 0.0f ? s / l : 0.0f;
  }
  if (p.out_ml != nullptr && lane == 0) {
    p.out_ml[2 * static_cast<size_t>(row)] = l > 0.0f ? big_m : -INFINITY;
    p.out_ml[2 * static_cast<size_t>(row) + 1] = l;
  }
}

}  // namespace

int launch_merge_partials(const PartialsMergeParams& p, void* stream) {
  const unsigned blocks = static_cast<unsigned>((p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  merge_partials_kernel<<<blocks, kWarpsPerBlock * 32, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvf::exec::cuda::detail
