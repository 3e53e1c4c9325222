// Prefill attention for head dim 128 on Hopper's warpgroup MMA (wgmma) and tensor memory
// accelerator (TMA); this file is built for sm_90a only (cmake/kvf_cuda.cmake). Same
// contract as prefill_attention.cuh's mma.sync kernel (attention.h: varlen, GQA, causal
// bottom-right aligned, rows without keys get zeros); see docs/cuda.md, "Prefill on wgmma".
//
// A block owns 128 query rows of one head of one sequence and is warp-specialized: two
// consumer warpgroups of 64 rows each and a producer warpgroup whose first thread loads Q
// once and the K/V tiles of 128 keys into a ring of kStages stages with TMA, which writes
// the hardware's 128-byte-swizzled layout directly. A stage's "full" mbarrier completes when
// its bytes land and its "empty" mbarrier when both consumers are done with it, so nobody
// meets at a block barrier in the key loop. A consumer warpgroup computes S = Q Kᵀ as 8
// wgmma m64n128k16 from shared memory and O += P V as 8 wgmma with P from registers
// (converted from S: the accumulator layout is the A layout) and V read transposed
// (MN-major); the S of tile j is issued together with the P V of tile j - 1, so the
// softmax of tile j runs while the tensor cores work on P V.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_block.cuh"
#include "exec/cuda/prefill_launch.h"
#include "exec/cuda/tma_ptx.cuh"
#include "exec/cuda/wgmma_ptx.cuh"

namespace kvf::exec::cuda::detail {
namespace {

constexpr int kD = 128;
constexpr int kBlockM = 128;                  // query rows per block: 2 consumer warpgroups x 64
constexpr int kBlockN = 128;                  // keys per K/V tile
constexpr int kConsumers = 256;               // two consumer warpgroups
constexpr int kThreads = kConsumers + 128;    // + a producer warpgroup (one thread issues TMA)
// setmaxnreg: 128 x 40 + 256 x 232 <= 64K. ptxas still compiles every path within the
// launch bound's 168 registers (a consumer path that needed more spilled, docs/cuda.md), so
// today this moves registers nobody uses; it is the layout FA3 runs.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
constexpr int kStages = 3;                    // K/V ring: tiles j + 1 (loading), j (Q Kᵀ), j - 1 (P V)
constexpr int kQBytes = kBlockM * kD * 2;     // 32 KB
constexpr int kTileBytes = kBlockN * kD * 2;  // 32 KB, one K or V tile
constexpr int kHalfBytes = kTileBytes / 2;    // one TMA box: 128 rows x 64 columns
constexpr int kBarBytes = 8 * (1 + 2 * kStages);
constexpr int kSmemBytes = kQBytes + 2 * kStages * kTileBytes + kBarBytes + 1024;  // + 1024-byte alignment slack

// TMA maps of q/out [total_q, Hq, 128] and k, v [total_k, Hkv, 128] (16-bit): boxes of 64
// columns x 1 head x 128 tokens, 128B swizzle.
struct Maps {
  CUtensorMap q, k, v;
};

template <bool kF16, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const __grid_constant__ Maps maps, const PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char wg_smem[];
  const uint32_t s_q = (static_cast<uint32_t>(__cvta_generic_to_shared(wg_smem)) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + kQBytes, s_v = s_k + kStages * kTileBytes;
  const uint32_t bar_q = s_v + kStages * kTileBytes;  // q landed
  auto bar_full = [&](int st) { return bar_q + 8 * (1 + st); };              // stage st landed
  auto bar_empty = [&](int st) { return bar_q + 8 * (1 + kStages + st); };   // consumers done with st
  const PrefillBlock blk(p, kD, kBlockM, kBlockN, kCausal);
  if (blk.skip) return;
  const int m0 = blk.m0, lq = blk.lq, lk = blk.lk, shift = blk.shift, n_blocks = blk.n_blocks;
  const int n_tiles = blk.n_tiles;
  const int warp_id = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    tma::mbar_init(bar_q, 1);
    for (int st = 0; st < kStages; ++st) {
      tma::mbar_init(bar_full(st), 1);
      tma::mbar_init(bar_empty(st), kConsumers);
    }
    tma::mbar_fence_init();
  }
  __syncthreads();

  // The producer's loads: q, then tile j into stage j % kStages once both consumers have
  // released the tile kStages before it.
  const int q_tok = p.cu_q[blk.b] + m0, k_tok = p.cu_k[blk.b], hkv = blk.h / p.n_rep;
  auto load_tile = [&](int j) {
    const int st = j % kStages, n = n_blocks - 1 - j;
    if (j >= kStages) tma::mbar_wait(bar_empty(st), (j / kStages - 1) & 1);
    const uint32_t sk = s_k + st * kTileBytes, sv = s_v + st * kTileBytes;
    tma::mbar_arrive_expect_tx(bar_full(st), 2 * kTileBytes);
    tma::load_3d(sk, &maps.k, 0, hkv, k_tok + n * kBlockN, bar_full(st));
    tma::load_3d(sk + kHalfBytes, &maps.k, 64, hkv, k_tok + n * kBlockN, bar_full(st));
    tma::load_3d(sv, &maps.v, 0, hkv, k_tok + n * kBlockN, bar_full(st));
    tma::load_3d(sv + kHalfBytes, &maps.v, 64, hkv, k_tok + n * kBlockN, bar_full(st));
  };
  if (warp_id >= kConsumers / 32) {  // the producer warpgroup: gives registers back, one thread loads
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (threadIdx.x == kConsumers) {
      tma::mbar_arrive_expect_tx(bar_q, kQBytes);
      tma::load_3d(s_q, &maps.q, 0, blk.h, q_tok, bar_q);
      tma::load_3d(s_q + kQBytes / 2, &maps.q, 64, blk.h, q_tok, bar_q);
      for (int j = 0; j < n_tiles; ++j) load_tile(j);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));

  const int wg = warp_id / 4, warp = warp_id % 4;
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
  tma::mbar_wait(bar_q, 0);

  // KV tiles from the last (the diagonal ones, masked) down to the first.
  const float sl2 = p.scale_log2;
  for (int it = 0; it < n_tiles; ++it) {
    const int n = n_blocks - 1 - it, stage = it % kStages;
    tma::mbar_wait(bar_full(stage), (it / kStages) & 1);
    const uint32_t sk = s_k + stage * kTileBytes;

    // S = Q Kᵀ for tile it, then P V for tile it - 1, both in flight; wait for S only.
    float s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.0f;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) wgmma::mma_ss<kF16>(s, q_desc(kk), k_desc(sk, kk));
    wgmma::commit();
    if (it > 0) issue_pv(s_v + ((it - 1) % kStages) * kTileBytes);
    if (it > 0) {
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
      const float base = mx == -INFINITY ? 0.0f : mx * sl2;
      corr[r] = ptx::exp2_fast(m_run[r] * sl2 - base);
      m_run[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = ptx::exp2_fast(fmaf(s[4 * j + 2 * r + e], sl2, -base));
          s[4 * j + 2 * r + e] = x;
          sum += x;
        }
      l_run[r] = l_run[r] * corr[r] + sum;
    }
    wgmma::wait<0>();  // P V of tile it - 1: o and pa are free, and so is its stage
    wgmma::fence_operands(o);
    if (it > 0) tma::mbar_arrive(bar_empty((it - 1) % kStages));
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
  if (n_tiles > 0) {  // P V of the last tile
    wgmma::fence();
    issue_pv(s_v + ((n_tiles - 1) % kStages) * kTileBytes);
    wgmma::wait<0>();
    wgmma::fence_operands(o);
  }

  // Normalize and store; a row that saw no key gets zeros.
  uint16_t* og = blk.out(p);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? __frcp_rn(l) : 0.0f;
    const int row = r0 + 8 * r;
    if (m0 + row >= lq) continue;
    uint16_t* dst = og + row * blk.q_stride + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + j * 8) = ptx::pack<kF16>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
#else
  __trap();  // built for sm_90a only; the host checks the device before launching
#endif
}

// cuTensorMapEncodeTiled from the driver, found once through the runtime (no -lcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A map of a [tokens, heads, 128] 16-bit tensor in boxes of 64 columns x 1 head x 128
// tokens. No tokens: a zeroed map, which no block reads (every block has zero key tiles).
bool encode(CUtensorMap* map, const void* base, int tokens, int heads, bool f16) {
  *map = CUtensorMap{};
  if (tokens <= 0) return true;
  const PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kD), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(kD) * 2, static_cast<cuuint64_t>(heads) * kD * 2};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(kBlockN)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  return fn(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base),
            dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <bool kF16, bool kCausal>
int launch_as(const Maps& maps, const PrefillParams& p, void* stream) {
  auto* k = prefill_wgmma_kernel<kF16, kCausal>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  const dim3 grid((p.max_seqlen_q + kBlockM - 1) / kBlockM, p.hq, p.batch);
  k<<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(maps, p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_prefill_d128_wgmma(const PrefillParams& p, void* stream) {
  if (p.max_seqlen_q <= 0) return 0;
  Maps maps;
  if (!encode(&maps.q, p.q, p.total_q, p.hq, p.f16) || !encode(&maps.k, p.k, p.total_k, p.hkv, p.f16) ||
      !encode(&maps.v, p.v, p.total_k, p.hkv, p.f16))
    return static_cast<int>(cudaErrorInvalidValue);
  if (p.f16) return p.causal ? launch_as<true, true>(maps, p, stream) : launch_as<true, false>(maps, p, stream);
  return p.causal ? launch_as<false, true>(maps, p, stream) : launch_as<false, false>(maps, p, stream);
}

}  // namespace kvf::exec::cuda::detail
