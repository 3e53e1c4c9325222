// What both prefill kernels (mma.sync and wgmma) share: a block's place in the varlen grid.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/prefill_launch.h"

namespace kvf::exec::cuda::detail {

// Block (x, h, b) of the grid owns query rows [m0, m0 + block_m) of head h of sequence b
// (x reversed, so the longest causal blocks are scheduled first) and visits the key tiles
// [0, n_blocks) of block_n keys that some row of it can see.
struct PrefillBlock {
  int b, h, m0, lq, lk;
  int shift;     // causal, bottom-right: query row i sees keys j <= i + shift
  int n_blocks;
  bool skip;     // past the sequence's queries (the varlen padding of the grid)
  int64_t q_stride, kv_stride;  // elements between tokens of q/out and of k/v
  const uint16_t* qg;  // row m0 of head h
  const uint16_t* kg;  // key 0 of h's KV head
  const uint16_t* vg;

  __device__ PrefillBlock(const PrefillParams& p, int d, int block_m, int block_n, bool causal) {
    b = static_cast<int>(blockIdx.z);
    h = static_cast<int>(blockIdx.y);
    m0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * block_m;
    const int q0 = p.cu_q[b], k0 = p.cu_k[b];
    lq = p.cu_q[b + 1] - q0;
    lk = p.cu_k[b + 1] - k0;
    skip = m0 >= lq;
    shift = lk - lq;
    const int n_end = causal ? min(lk, max(0, m0 + block_m + shift)) : lk;
    n_blocks = (n_end + block_n - 1) / block_n;
    q_stride = static_cast<int64_t>(p.hq) * d;
    kv_stride = static_cast<int64_t>(p.hkv) * d;
    qg = static_cast<const uint16_t*>(p.q) + (q0 + m0) * q_stride + h * d;
    kg = static_cast<const uint16_t*>(p.k) + k0 * kv_stride + (h / p.n_rep) * d;
    vg = static_cast<const uint16_t*>(p.v) + k0 * kv_stride + (h / p.n_rep) * d;
  }
  // Output row m0 of head h.
  __device__ uint16_t* out(const PrefillParams& p) const {
    return static_cast<uint16_t*>(p.out) + (p.cu_q[b] + m0) * q_stride + h * (q_stride / p.hq);
  }
};

}  // namespace kvf::exec::cuda::detail
