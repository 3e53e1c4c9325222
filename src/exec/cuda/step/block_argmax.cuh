// The block-wide greedy token of one row: exec::row_argmax's answer (the first largest value;
// a NaN never wins, except at 0, where nothing beats it; 0 when every value is NaN).
#pragma once

#include <cstdint>

namespace kvf::exec::cuda::step {

// Every thread of a block of Threads calls it; thread 0 gets the answer (the others 0).
// Each thread keeps the first largest of its elements, the block the first largest of those.
template <int Threads>
__device__ int32_t block_argmax(const float* xr, int64_t d) {
  __shared__ float best_v[Threads / 32];
  __shared__ int32_t best_i[Threads / 32];
  float v = -INFINITY;
  int32_t at = INT32_MAX;
  const auto take = [&](float y, int64_t c) {
    if (y > v || (y == v && c < at)) v = y, at = static_cast<int32_t>(c);
  };
  // A row's logits were just written, so they come from L2: 16 bytes a load and several
  // loads in flight a thread keep one block from waiting out a round trip per element.
  if (d % 4 == 0 && reinterpret_cast<uintptr_t>(xr) % 16 == 0) {
    const auto* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll 4
    for (int64_t q = threadIdx.x; q < d / 4; q += Threads) {
      const float4 y = x4[q];
      take(y.x, 4 * q), take(y.y, 4 * q + 1), take(y.z, 4 * q + 2), take(y.w, 4 * q + 3);
    }
  } else {
    for (int64_t c = threadIdx.x; c < d; c += Threads) take(xr[c], c);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t j = __shfl_xor_sync(0xffffffffu, at, o);
    if (y > v || (y == v && j < at)) v = y, at = j;
  }
  if (threadIdx.x % 32 == 0) best_v[threadIdx.x / 32] = v, best_i[threadIdx.x / 32] = at;
  __syncthreads();
  if (threadIdx.x != 0) return 0;  // thread 0 holds warp 0's best
  for (int w = 1; w < Threads / 32; ++w) {
    if (best_v[w] > v || (best_v[w] == v && best_i[w] < at)) v = best_v[w], at = best_i[w];
  }
  return (xr[0] != xr[0] || at == INT32_MAX) ? 0 : at;  // a NaN at 0, or every value NaN
}

}  // namespace kvf::exec::cuda::step
