// What both prefill kernels (mma.sync and wgmma) share: a block's place in the varlen grid.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_launch.h"

namespace kvf::exec::cuda::detail {

// Block (x, h, b) of the grid owns query rows [m0, m0 + block_m) of head h of sequence b
// (x reversed, so the longest causal blocks are scheduled first) and visits the key tiles
// [n_blocks - n_tiles, n_blocks) of block_n keys that some row of it can see, from the last.
// The kernel reads a block through this interface (StepBlock below is the other one).
struct PrefillBlock {
  using Params = PrefillParams;
  int b, h, m0, lq, lk;
  int shift;     // query row i is at key position i + shift (bottom-right aligned)
  int n_blocks;  // one past the last tile any row sees
  int n_tiles;   // tiles visited: a window hides the first ones from every row
  bool skip;     // past the sequence's queries (the varlen padding of the grid)
  int64_t q_stride, kv_stride;  // elements between tokens of q/out and of k/v
  const uint16_t* qg;  // row m0 of head h
  const uint16_t* kg;  // key 0 of h's KV head
  const uint16_t* vg;

  __device__ static const PrefillParams& base(const PrefillParams& p) { return p; }

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
  // The key position of query row `row` (block-relative rows are m0 + r).
  __device__ int pos(int row) const { return row + shift; }
  // The least key position among rows [row, row + rows): the warp's diagonal.
  __device__ int least_pos(int row, int /*rows*/) const { return row + shift; }
  // Output row m0 + r of head h.
  __device__ uint16_t* out(const PrefillParams& p) const {
    return static_cast<uint16_t*>(p.out) + (p.cu_q[b] + m0) * q_stride + h * (q_stride / p.hq);
  }
};

// The step executor's block (StepPrefillParams): q and out f32 with strides, K/V the dense
// cache with each sequence's live length, and causality from each query row's position. The
// positions need not be consecutive: a block visits the tiles up to its rows' largest position
// and masks per score; a warp skips the per-score pass on tiles below its rows' least.
struct StepBlock {
  using Params = StepPrefillParams;
  int b, h, m0, lq, lk;
  int n_blocks, n_tiles;
  bool skip;
  int64_t q_stride, kv_stride;  // elements between rows of q/out and of k/v
  const float* qg;               // row m0 of head h
  const uint16_t* kg;            // key 0 of h's KV head
  const uint16_t* vg;
  const int32_t* rows_pos;       // the positions of the sequence's query rows

  __device__ static const PrefillParams& base(const StepPrefillParams& s) { return s.p; }

  __device__ StepBlock(const StepPrefillParams& s, int /*d*/, int block_m, int block_n, bool /*causal*/) {
    const PrefillParams& p = s.p;
    b = static_cast<int>(blockIdx.z);
    h = static_cast<int>(blockIdx.y);
    m0 = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * block_m;
    lq = p.max_seqlen_q;
    lk = min(max(s.lens[b], 0), s.cap);
    skip = m0 >= lq;
    rows_pos = s.pos + static_cast<int64_t>(b) * lq;
    // Every warp finds the block's largest position itself (no shared memory, no barrier).
    int most = -1;
    for (int r = m0 + static_cast<int>(threadIdx.x % 32); r < min(m0 + block_m, lq); r += 32) most = max(most, rows_pos[r]);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) most = max(most, __shfl_xor_sync(0xffffffffu, most, o));
    const int n_end = min(lk, max(0, most + 1));
    n_blocks = (n_end + block_n - 1) / block_n;
    n_tiles = n_blocks;
    q_stride = s.q_row;
    kv_stride = s.k_row;
    qg = static_cast<const float*>(p.q) + b * s.q_batch + h * s.q_head + m0 * s.q_row;
    const int64_t kv0 = b * s.k_batch + (h / p.n_rep) * s.k_head;
    kg = static_cast<const uint16_t*>(p.k) + kv0;
    vg = static_cast<const uint16_t*>(p.v) + kv0;
  }
  // Rows past lq take the last row's position (they are never stored).
  __device__ int pos(int row) const { return rows_pos[min(row, lq - 1)]; }
  // Called by a whole warp: each lane reads one of up to 32 rows.
  __device__ int least_pos(int row, int rows) const {
    const int lane = static_cast<int>(threadIdx.x % 32);
    int least = lane < rows ? pos(row + lane) : INT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) least = min(least, __shfl_xor_sync(0xffffffffu, least, o));
    return least;
  }
  __device__ float* out(const StepPrefillParams& s) const {
    return static_cast<float*>(s.p.out) + b * s.q_batch + h * s.q_head + m0 * s.q_row;
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
