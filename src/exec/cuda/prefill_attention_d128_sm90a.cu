// Prefill attention for head dim 128 on Hopper's warpgroup MMA (wgmma; this file is built
// for sm_90a only, cmake/kvf_cuda.cmake). Same contract as prefill_attention.cuh's mma.sync
// kernel (prefill_attention.h semantics: varlen, GQA, causal bottom-right aligned, rows
// without keys get zeros); see docs/cuda.md, "Prefill on wgmma".
//
// A block owns 128 query rows of one head of one sequence: two consumer warpgroups of 64
// rows each. Q (128 x 128) and three stages of K and V tiles (128 keys each) sit in shared
// memory in the hardware's 128-byte-swizzled layout, written by cp.async from all 256
// threads. S = Q Kᵀ is 8 wgmma m64n128k16 with both operands in shared memory; O += P V is
// 8 wgmma with P from registers (converted from S: the accumulator layout is the A layout)
// and V read transposed (MN-major) from shared memory. The two are pipelined within a
// warpgroup: the wgmma of S for tile j and of P V for tile j - 1 are issued together, and
// the softmax of tile j runs while the tensor cores still work on P V of tile j - 1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_block.cuh"
#include "exec/cuda/prefill_launch.h"
#include "exec/cuda/wgmma_ptx.cuh"

namespace kvf::exec::cuda::detail {
namespace {

constexpr int kD = 128;
constexpr int kBlockM = 128;                      // query rows per block: 2 warpgroups x 64
constexpr int kBlockN = 128;                      // keys per K/V tile
constexpr int kThreads = 256;
constexpr int kQBytes = kBlockM * kD * 2;         // 32 KB
constexpr int kTileBytes = kBlockN * kD * 2;      // 32 KB, one K or V tile
constexpr int kStages = 3;  // tiles j + 1 (loading), j (S = Q Kᵀ), j - 1 (P V) resident at once
constexpr int kSmemBytes = kQBytes + 2 * kStages * kTileBytes + 1024;  // + 1024-byte alignment slack

// Copies `rows` rows of 128 16-bit values (global stride `stride` elements) into a tile in
// the two-half 128B-swizzled layout; rows at or past `valid` are zero-filled, unread.
__device__ __forceinline__ void load_tile(uint32_t dst, const uint16_t* src, int64_t stride, int rows, int valid) {
  for (int i = threadIdx.x; i < rows * 16; i += kThreads) {
    const int r = i / 16, c = i % 16;
    const bool ok = r < valid;
    ptx::cp_async16(dst + wgmma::sw128_offset(rows, r, c), src + (ok ? r : 0) * stride + c * 8, ok ? 16 : 0);
  }
}

template <bool kF16, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_kernel(const PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char wg_smem[];
  const uint32_t s_q = (static_cast<uint32_t>(__cvta_generic_to_shared(wg_smem)) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + kQBytes, s_v = s_k + kStages * kTileBytes;
  const PrefillBlock blk(p, kD, kBlockM, kBlockN, kCausal);
  if (blk.skip) return;
  const int m0 = blk.m0, lq = blk.lq, lk = blk.lk, shift = blk.shift, n_blocks = blk.n_blocks;
  const int64_t q_stride = blk.q_stride, kv_stride = blk.kv_stride;
  const uint16_t *qg = blk.qg, *kg = blk.kg, *vg = blk.vg;
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  auto load_kv = [&](int n, int stage) {
    const int valid = min(kBlockN, lk - n * kBlockN);
    load_tile(s_k + stage * kTileBytes, kg + n * kBlockN * kv_stride, kv_stride, kBlockN, valid);
    load_tile(s_v + stage * kTileBytes, vg + n * kBlockN * kv_stride, kv_stride, kBlockN, valid);
  };
  load_tile(s_q, qg, q_stride, kBlockM, lq - m0);
  if (n_blocks > 0) load_kv(n_blocks - 1, 0);
  ptx::commit();

  // The thread's rows (block-relative): r0 = 64 wg + 16 warp + lane / 4 and r0 + 8.
  const int r0 = wg * 64 + warp * 16 + lane / 4;
  const int row_wg = m0 + wg * 64;  // the warpgroup's first query row
  float o[64] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  uint32_t pa[8][4];  // P of the previous tile, the A operand of its P V
  // K-major operands (q, k): one k16 step is 32 bytes into a 128-byte row; 4 per half.
  // q's warpgroup rows start 64 rows (8 KB) into each half. V is MN-major: 64-column halves
  // kBlockN * 128 bytes apart, 8-key groups 1024 bytes apart, 16 keys per step.
  auto q_desc = [&](int kk) {
    return wgmma::desc(s_q + (kk / 4) * (kBlockM * 128) + wg * 64 * 128 + (kk % 4) * 32, 16, 1024);
  };
  auto k_desc = [&](uint32_t sk, int kk) { return wgmma::desc(sk + (kk / 4) * (kBlockN * 128) + (kk % 4) * 32, 16, 1024); };
  auto v_desc = [&](uint32_t sv, int kk) { return wgmma::desc(sv + kk * 2048, kBlockN * 128, 1024); };
  auto issue_pv = [&](uint32_t sv) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) wgmma::mma_rs_t<kF16>(o, pa[kk], v_desc(sv, kk));
    wgmma::commit();
  };

  // KV tiles from the last (the diagonal ones, masked) down to the first.
  for (int it = 0; it < n_blocks; ++it) {
    const int n = n_blocks - 1 - it, stage = it % kStages;
    ptx::wait<0>();  // tile it has landed (this thread's copies, issued one iteration ago)
    wgmma::fence_proxy_async();  // ... visible to wgmma's async proxy
    __syncthreads();  // every thread's copies; and every warpgroup is done with tile it - 2
    if (it + 1 < n_blocks) {  // into tile it - 2's stage; tiles it (S) and it - 1 (P V) stay
      load_kv(n - 1, (it + 1) % kStages);
      ptx::commit();
    }
    const uint32_t sk = s_k + stage * kTileBytes;

    // S = Q Kᵀ for tile it, then P V for tile it - 1, both in flight; wait for S only.
    float s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.0f;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) wgmma::mma_ss<kF16>(s, q_desc(kk), k_desc(sk, kk));
    wgmma::commit();
    if (it > 0) {
      issue_pv(s_v + ((it - 1) % kStages) * kTileBytes);
      wgmma::wait<1>();
    } else {
      wgmma::wait<0>();
    }
    wgmma::fence_operands(s);

    // Masks only where a key can be invisible to one of the warpgroup's rows.
    const int key0 = n * kBlockN;
    if (key0 + kBlockN > lk || (kCausal && key0 + kBlockN - 1 > row_wg + shift)) {
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const int key = key0 + (i / 4) * 8 + 2 * (lane % 4) + (i & 1);
        const int row = m0 + r0 + ((i / 2) & 1) * 8;
        if (key >= lk || (kCausal && key > row + shift)) s[i] = -INFINITY;
      }
    }
    // Online softmax of rows r0 (s[4 j + 0..1]) and r0 + 8 (s[4 j + 2..3]), log2 domain,
    // while P V of the previous tile runs; O is rescaled once that has landed.
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.0f : mx * p.scale_log2;
      corr[r] = ptx::exp2_fast(m_run[r] * p.scale_log2 - base);
      m_run[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = ptx::exp2_fast(fmaf(s[4 * j + 2 * r + e], p.scale_log2, -base));
          s[4 * j + 2 * r + e] = x;
          sum += x;
        }
      l_run[r] = l_run[r] * corr[r] + sum;
    }
    wgmma::wait<0>();  // P V of tile it - 1: o and pa are free
    wgmma::fence_operands(o);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[4 * j] *= corr[0];
      o[4 * j + 1] *= corr[0];
      o[4 * j + 2] *= corr[1];
      o[4 * j + 3] *= corr[1];
    }
    // P of tile it: its k16 step kk is S's n8 tiles 2 kk and 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      pa[kk][0] = ptx::pack<kF16>(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = ptx::pack<kF16>(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = ptx::pack<kF16>(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = ptx::pack<kF16>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }
  if (n_blocks > 0) {  // P V of the last tile
    wgmma::fence();
    issue_pv(s_v + ((n_blocks - 1) % kStages) * kTileBytes);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
  }
  ptx::wait<0>();  // no copy outlives the block (n_blocks == 0 leaves the q copies unwaited)

  // Normalize and store; a row that saw no key gets zeros.
  uint16_t* og = blk.out(p);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = r0 + 8 * r;
    if (m0 + row >= lq) continue;
    uint16_t* dst = og + row * q_stride + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + j * 8) = ptx::pack<kF16>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
#else
  __trap();  // built for sm_90a only; the host checks the device before launching
#endif
}

template <bool kF16, bool kCausal>
int launch_as(const PrefillParams& p, void* stream) {
  auto* k = prefill_wgmma_kernel<kF16, kCausal>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  const dim3 grid((p.max_seqlen_q + kBlockM - 1) / kBlockM, p.hq, p.batch);
  k<<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_prefill_d128_wgmma(const PrefillParams& p, void* stream) {
  if (p.max_seqlen_q <= 0) return 0;
  if (p.f16) return p.causal ? launch_as<true, true>(p, stream) : launch_as<true, false>(p, stream);
  return p.causal ? launch_as<false, true>(p, stream) : launch_as<false, false>(p, stream);
}

}  // namespace kvf::exec::cuda::detail
