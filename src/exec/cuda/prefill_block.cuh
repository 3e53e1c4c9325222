// What both prefill kernels (mma.sync and wgmma) share: a block's place in the varlen grid.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_launch.h"

namespace kvf::exec::cuda::detail {

// Block (x, h, b) of the grid owns query rows [m0, m0 + block_m) of head h of sequence b
// (x reversed, so the longest causal blocks are scheduled first) and visits the key tiles
// [n_blocks - n_tiles, n_blocks) of block_n keys that some row of it can see, from the last.
struct PrefillBlock {
  int b, h, m0, lq, lk;
  int shift;     // query row i is at key position i + shift (bottom-right aligned)
  int n_blocks;  // one past the last tile any row sees
  int n_tiles;   // tiles visited: a window hides the first ones from every row
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
    // With a window, row m0 (the block's first) sees keys > m0 + shift - window; later rows
    // see fewer of the early keys still.
    const int first_key = p.window > 0 ? max(0, m0 + shift - p.window + 1) : 0;
    n_tiles = max(0, n_blocks - first_key / block_n);
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

// The score of key `key` for the query at key position `pos`: -inf when the key is hidden
// (past lk, causal, outside the window); with softcap or ALiBi, transformed into the log2
// domain here (the softmax then uses a scale of 1, `softmax_scale`); else the raw q.k,
// which the softmax scales by scale * log2 e.
struct ScoreMods {
  float scale, softcap, inv_softcap, slope;
  int window, lk;
  bool causal, extras;

  __device__ ScoreMods(const PrefillParams& p, int h, int lk_, bool causal_)
      : scale(p.scale),
        softcap(p.softcap),
        inv_softcap(p.inv_softcap),
        slope(p.alibi != nullptr ? p.alibi[h] : 0.0f),
        window(p.window),
        lk(lk_),
        causal(causal_),
        extras(p.softcap > 0.0f || p.alibi != nullptr) {}
  // Whether a tile's keys need the per-score pass even away from the diagonal and lk.
  __device__ bool every_tile() const { return extras || window > 0; }
  __device__ float softmax_scale(const PrefillParams& p) const { return extras ? 1.0f : p.scale_log2; }
  __device__ float operator()(float s, int key, int pos) const {
    if (key >= lk || (causal && key > pos) || (window > 0 && key <= pos - window)) return -INFINITY;
    if (!extras) return s;
    float x = s * scale;
    if (softcap > 0.0f) x = softcap * ptx::tanh_fast(x * inv_softcap);
    return (x + slope * static_cast<float>(key - pos)) * kLog2e;
  }
};

}  // namespace kvf::exec::cuda::detail
