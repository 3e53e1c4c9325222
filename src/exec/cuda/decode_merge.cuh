// What both decode split kernels share: programmatic dependent launch, the block's place in
// the grid (its keys and rows), and at the end the merge of its partial softmax states and
// the store of its query rows.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "exec/cuda/decode_launch.h"
#include "exec/cuda/mma_ptx.cuh"

namespace kvf::exec::cuda::detail {

// Programmatic dependent launch (sm_90): every decode kernel is launched so that it may
// start while the stream's previous kernel finishes; it waits here, before its first global
// read or write, until that kernel has ended and its writes are visible, so the overlap is
// the launch and block setup, never data. A kernel lets the next one launch early with
// pdl_trigger() (the split kernels after their key loop, the combine at once).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;"); }

template <typename Kernel>
cudaError_t launch_dependent(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                             const DecodeParams& p) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

// One block of the split grid: x = split * row_blocks + row block, y = KV head, z = batch
// row. Keys [t0, t1) of row b; the last split runs to len whatever the chunk says.
struct SplitBlock {
  int rb, split, hkv, b, len, t0, t1;
  bool skip;       // past the row's length: the combine reads only the splits a row has
  bool extras;     // softcap or ALiBi: scores leave the log2 domain until transformed
  float qscale;    // what q is multiplied by: scale, times log2 e without extras

  __device__ explicit SplitBlock(const DecodeParams& p)
      : rb(static_cast<int>(blockIdx.x) % p.row_blocks),
        split(static_cast<int>(blockIdx.x) / p.row_blocks),
        hkv(static_cast<int>(blockIdx.y)),
        b(static_cast<int>(blockIdx.z)),
        len(p.lens[b]),
        t0(split * p.chunk),
        t1(split == p.splits - 1 ? len : min(t0 + p.chunk, len)),
        skip(p.splits > 1 && t0 >= len),
        extras(p.softcap > 0.0f || p.alibi != nullptr),
        qscale(extras ? p.scale : p.scale * kLog2e) {}
};

// Shared memory holds `groups` partial states (running max m and sum l in the log2 domain,
// unnormalized acc) for each of the block's `rows` query rows: ml [groups][rows][2], acc
// [groups][rows][DV]. Merges them per row and writes, for the rows of row block rb that
// exist, the normalized output (one split; zeros for a row that saw no key) or this split's
// partial (acc, m, l) for decode_combine_kernel. Called by every thread of the block.
template <int DV>
__device__ void merge_and_store(const DecodeParams& p, const float* red_ml, const float* red_acc, int groups,
                                int rows, int rb, int b, int hkv, int split) {
  const int qr = p.n_rep * p.lq;
  for (int idx = threadIdx.x; idx < rows * DV; idx += blockDim.x) {
    const int r = idx / DV, d = idx % DV, gr = rb * rows + r;
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
    const int h = hkv * p.n_rep + gr / p.lq, i = gr % p.lq;
    const size_t row = (static_cast<size_t>(b) * p.hq + h) * p.lq + i;
    if (p.splits == 1) {
      p.out[row * DV + d] = sl > 0.0f ? sa / sl : 0.0f;
    } else {
      const size_t pr = row * p.splits + split;
      p.part_acc[pr * DV + d] = sa;
      if (d == 0) {
        p.part_ml[pr * 2] = mmax;
        p.part_ml[pr * 2 + 1] = sl;
      }
    }
  }
}

}  // namespace kvf::exec::cuda::detail
