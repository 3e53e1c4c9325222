// What both decode split kernels share: the block's place in the grid (its keys and rows),
// and at the end the merge of its partial softmax states, the store of its query rows and,
// for split rows, the merge of the splits by their last block: a decode is one kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "exec/cuda/decode_launch.h"
#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/programmatic_launch.cuh"

namespace kvf::exec::cuda::detail {

// Keys per split of a row of `len` keys: fixed by the plan, or (chunks_from_lens) the row's
// length shared evenly by the splits, rounded up to the kernel's pass, never under p.chunk.
__device__ inline int row_chunk(const DecodeParams& p, int len) {
  if (!p.chunks_from_lens) return p.chunk;
  const int even = (len + p.splits - 1) / p.splits;
  return max(p.chunk, (even + p.chunk_align - 1) / p.chunk_align * p.chunk_align);
}

// One block of the split grid: x = split * row_blocks + row block, y = KV head, z = batch
// row. Keys [t0, t1) of row b; the last split runs to len whatever the chunk says.
struct SplitBlock {
  int rb, split, hkv, b, len, chunk, t0, t1;
  int live;        // splits of row b that have keys (at least 1): the blocks its merge waits for
  bool skip;       // a split past the row's length; split 0 always runs, so a row with no keys gets zeros
  bool extras;     // softcap, ALiBi or a mask: scores leave the log2 domain until transformed
  float qscale;    // what q is multiplied by: scale, times log2 e without extras

  __device__ explicit SplitBlock(const DecodeParams& p)
      : rb(static_cast<int>(blockIdx.x) % p.row_blocks),
        split(static_cast<int>(blockIdx.x) / p.row_blocks),
        hkv(static_cast<int>(blockIdx.y)),
        b(static_cast<int>(blockIdx.z)),
        len(p.lens[b]),
        chunk(row_chunk(p, len)),
        t0(split * chunk),
        t1(split == p.splits - 1 ? len : min(t0 + chunk, len)),
        live(len <= 0 ? 1 : min(p.splits, (len + chunk - 1) / chunk)),
        skip(split > 0 && t0 >= len),
        extras(p.softcap > 0.0f || p.alibi != nullptr || p.mask != nullptr),
        qscale(extras ? p.scale : p.scale * kLog2e) {}

  // Output row (b, h, i) of the block's query row gr (of n_rep * Lq).
  __device__ size_t out_row(const DecodeParams& p, int gr) const {
    const int h = hkv * p.n_rep + gr / p.lq, i = gr % p.lq;
    return (static_cast<size_t>(b) * p.hq + h) * p.lq + i;
  }
};

// A row's softmax state for a later merge over its other keys (DecodeParams::ml): (-inf, 0)
// for a row that saw no key.
__device__ inline void store_ml(const DecodeParams& p, size_t row, float m, float l) {
  p.ml[2 * row] = l > 0.0f ? m : -INFINITY;
  p.ml[2 * row + 1] = l;
}

// One warp merges the `live` split partials (acc, m, l) of output row `row` into out (zeros
// for a row that saw no key). Lanes hold the (m, l) of 32 splits and DV / 32 columns each;
// the splits are folded in one pass with a running max, as the key loop folds keys, so a
// batch's acc loads are issued together with the (m, l) loads instead of after the max:
// up to kBatch splits cost one L2 round trip. Reads through L2: other blocks wrote them.
template <int DV>
__device__ void merge_row(const DecodeParams& p, size_t row, int live) {
  constexpr int kCols = DV / 32, kBatch = 64 / kCols;  // 64 acc registers in flight
  static_assert(kCols == 2 || kCols == 4 || kCols == 8, "DV 64, 128 or 256");
  const unsigned all = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float* ml = p.part_ml + row * p.splits * 2;
  const float* acc = p.part_acc + row * p.splits * DV + lane * kCols;
  float m_run = -INFINITY, sl = 0.0f, a[kCols] = {};
  for (int s0 = 0; s0 < live; s0 += 32) {
    const int n = min(32, live - s0);
    const float m_lane = lane < n ? __ldcg(ml + 2 * (s0 + lane)) : -INFINITY;
    const float l_lane = lane < n ? __ldcg(ml + 2 * (s0 + lane) + 1) : 0.0f;
    for (int j0 = 0; j0 < n; j0 += kBatch) {
      float2 x[kBatch][kCols / 2];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
#pragma unroll
        for (int c = 0; c < kCols / 2; ++c)
          x[j][c] = j0 + j < n ? __ldcg(reinterpret_cast<const float2*>(acc + static_cast<size_t>(s0 + j0 + j) * DV) + c)
                               : make_float2(0.0f, 0.0f);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float m = __shfl_sync(all, m_lane, (j0 + j) % 32), l = __shfl_sync(all, l_lane, (j0 + j) % 32);
        if (j0 + j >= n || m == -INFINITY) continue;  // warp-uniform: past the batch, or a split that saw no key
        const float m_new = fmaxf(m_run, m);
        const float c_old = exp2f(m_run - m_new), c_new = exp2f(m - m_new);  // exp2(-inf) = 0
        sl = sl * c_old + l * c_new;
#pragma unroll
        for (int c = 0; c < kCols / 2; ++c) {
          a[2 * c] = a[2 * c] * c_old + x[j][c].x * c_new;
          a[2 * c + 1] = a[2 * c + 1] * c_old + x[j][c].y * c_new;
        }
        m_run = m_new;
      }
    }
  }
  const float inv = sl > 0.0f ? 1.0f / sl : 0.0f;
  if (p.ml != nullptr && lane == 0) store_ml(p, row, m_run, sl);
  float* dst = p.out + row * DV + lane * kCols;
#pragma unroll
  for (int c = 0; c < kCols; ++c) dst[c] = a[c] * inv;
}

// The block has stored its split partial: it arrives on its (b, KV head, row block)
// counter, and the last of the row's live splits to arrive merges them into out, a warp
// per row. The counter wraps back to 0 on that arrival (atomicInc), ready for the next
// decode.
template <int DV>
__device__ void merge_if_last(const DecodeParams& p, const SplitBlock& blk, int rows) {
  __shared__ bool last;
  __syncthreads();  // the block's partial stores precede thread 0's release
  if (threadIdx.x == 0) {
    const size_t at = (static_cast<size_t>(blk.b) * p.hkv + blk.hkv) * p.row_blocks + blk.rb;
    last = ptx::atom_inc_acq_rel(p.counters + at, static_cast<unsigned>(blk.live - 1)) == static_cast<unsigned>(blk.live - 1);
  }
  __syncthreads();  // thread 0's acquire precedes the block's partial loads
  if (!last) return;
  const int qr = p.n_rep * p.lq, warps = static_cast<int>(blockDim.x / 32);
  for (int r = static_cast<int>(threadIdx.x / 32); r < rows && blk.rb * rows + r < qr; r += warps)
    merge_row<DV>(p, blk.out_row(p, blk.rb * rows + r), blk.live);
}

// Shared memory holds `groups` partial states (running max m and sum l in the log2 domain,
// unnormalized acc) for each of the block's `rows` query rows: ml [groups][rows][2], acc
// [groups][rows][DV]. Merges them per row and writes, for the rows of the block's row block
// that exist, the normalized output when the row has one live split (zeros for a row that
// saw no key), else this split's partial (acc, m, l), which the row's last split block to
// finish merges (merge_if_last). Called by every thread of the block.
template <int DV>
__device__ void merge_and_store(const DecodeParams& p, const SplitBlock& blk, const float* red_ml,
                                const float* red_acc, int groups, int rows) {
  const int qr = p.n_rep * p.lq;
  const bool direct = blk.live == 1;
  for (int idx = threadIdx.x; idx < rows * DV; idx += blockDim.x) {
    const int r = idx / DV, d = idx % DV, gr = blk.rb * rows + r;
    if (gr >= qr) continue;
    float mmax = -INFINITY;
    for (int g = 0; g < groups; ++g) mmax = fmaxf(mmax, red_ml[(g * rows + r) * 2]);
    float sl = 0.0f, sa = 0.0f;
    if (mmax != -INFINITY) {
      for (int g = 0; g < groups; ++g) {
        const float w = exp2f(red_ml[(g * rows + r) * 2] - mmax);  // exp2(-inf) = 0
        sl += red_ml[(g * rows + r) * 2 + 1] * w;
        sa += red_acc[(g * rows + r) * DV + d] * w;
      }
    }
    const size_t row = blk.out_row(p, gr);
    if (direct) {
      p.out[row * DV + d] = sl > 0.0f ? sa / sl : 0.0f;
      if (p.ml != nullptr && d == 0) store_ml(p, row, mmax, sl);
    } else {
      const size_t pr = row * p.splits + blk.split;
      p.part_acc[pr * DV + d] = sa;
      if (d == 0) {
        p.part_ml[pr * 2] = mmax;
        p.part_ml[pr * 2 + 1] = sl;
      }
    }
  }
  if (!direct) merge_if_last<DV>(p, blk, rows);
}

}  // namespace kvf::exec::cuda::detail
