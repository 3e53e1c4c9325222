// Prefill attention on Hopper's warpgroup MMA (wgmma) and tensor memory accelerator (TMA),
// head dims 64, 128 and 256; this file is built for sm_90a only (cmake/kvf_cuda.cmake). Same
// contract as prefill_attention.cuh's mma.sync kernel (attention.h: varlen, GQA, causal
// bottom-right aligned, rows without keys get zeros); see docs/cuda.md, "Prefill on wgmma".
//
// A block owns 64 query rows per consumer warpgroup (two: 128 rows) of one head of one
// sequence. Q is loaded once; K and V tiles of kBlockN keys stream through two rings of kStages
// stages, loaded by TMA in the hardware's 128-byte-swizzled layout. Each stage has a "full"
// mbarrier (its bytes landed) and an "empty" one (both consumers are done with it): K is
// released as soon as S = Q Kᵀ has read it, V once P V has, so nobody meets at a block
// barrier in the key loop. A consumer warpgroup computes S as D / 16 wgmma m64nNk16 from
// shared memory and O += P V as kBlockN / 16 wgmma with P from registers (converted from S:
// the accumulator layout is the A layout) and V read transposed (MN-major); the S of tile j
// is issued together with the P V of tile j - 1, so the softmax of tile j runs while the
// tensor cores work on P V.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_block.cuh"
#include "exec/cuda/prefill_launch.h"
#include "exec/cuda/tensor_map.h"
#include "exec/cuda/tma_ptx.cuh"
#include "exec/cuda/wgmma_ptx.cuh"

namespace kvf::exec::cuda::detail {
namespace {

// Consumer warpgroups (64 query rows each), keys per K/V tile, stages per ring, who issues
// the loads, and blocks per SM, per head dim. A producer warpgroup (FA3's layout) makes the
// block 384 threads, and ptxas then compiles every thread within 168 registers (65536 / 384;
// setmaxnreg moves registers at run time, ptxas does not plan for it: docs/cuda.md): O
// (D / 2), S and P (3 kBlockN / 4) and the addresses fit for d 64 and 128. At d 256, O alone
// is 128 registers: the first consumer thread issues the loads instead (256 threads, up to
// 255 registers) with 64-key tiles. docs/cuda.md has what the other shapes measured.
template <int D> struct WgShape;
template <> struct WgShape<64> {
  static constexpr int kConsumerWgs = 2, kBlockN = 128, kStages = 4, kMinBlocks = 1;
  static constexpr bool kProducer = true;
};
template <> struct WgShape<128> {
  static constexpr int kConsumerWgs = 2, kBlockN = 128, kStages = 3, kMinBlocks = 1;
  static constexpr bool kProducer = true;
};
template <> struct WgShape<256> {
  static constexpr int kConsumerWgs = 2, kBlockN = 64, kStages = 2, kMinBlocks = 1;
  static constexpr bool kProducer = false;
};

// setmaxnreg (the producer layout): the producer's warps down to 40, the consumers' up to
// what that frees (232 with two consumer warpgroups), a multiple of 8, at most 256.
constexpr int kProducerRegs = 40;
__host__ __device__ constexpr int consumer_regs(int consumers, int min_blocks) {
  const int freed = ((65536 / min_blocks - 128 * kProducerRegs) / consumers) / 8 * 8;
  return freed < 256 ? freed : 256;
}

template <int D>
struct WgPrefill : WgShape<D> {
  using WgShape<D>::kConsumerWgs;
  using WgShape<D>::kBlockN;
  using WgShape<D>::kStages;
  using WgShape<D>::kProducer;
  using WgShape<D>::kMinBlocks;
  static constexpr int kBlockM = 64 * kConsumerWgs;  // query rows per block
  static constexpr int kConsumers = 128 * kConsumerWgs;
  static constexpr int kThreads = kConsumers + (kProducer ? 128 : 0);
  static constexpr int kBoxes = D / 64;              // TMA boxes of 64 columns per token row
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kTileBytes = kBlockN * D * 2;  // one K or V tile
  static constexpr int kBarBytes = 8 * (1 + 4 * kStages);
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kTileBytes + kBarBytes + 1024;  // + alignment slack
  static_assert(kSmemBytes * kMinBlocks <= 227 * 1024, "shared memory for kMinBlocks blocks per SM");
  static_assert(kBlockM <= 256 && kBlockN <= 256, "TMA boxes of at most 256 rows");
};

// The mbarriers after the rings: q landed, then per stage K full, V full, K empty, V empty.
enum Bar { kFullK, kFullV, kEmptyK, kEmptyV };

// TMA maps of q/out [total_q, Hq, D] and k, v [total_k, Hkv, D] (16-bit): boxes of 64
// columns x 1 head x 128 (q) or kBlockN (k, v) tokens, 128B swizzle.
struct Maps {
  CUtensorMap q, k, v;
};

template <int D, bool kF16, bool kCausal>
__global__ void __launch_bounds__(WgPrefill<D>::kThreads, WgPrefill<D>::kMinBlocks)
    prefill_wgmma_kernel(const __grid_constant__ Maps maps, const PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Sh = WgPrefill<D>;
  constexpr int M = Sh::kBlockM, N = Sh::kBlockN, S = Sh::kStages;
  extern __shared__ unsigned char wg_smem[];
  const uint32_t s_q = (static_cast<uint32_t>(__cvta_generic_to_shared(wg_smem)) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + Sh::kQBytes, s_v = s_k + S * Sh::kTileBytes;
  const uint32_t bar_q = s_v + S * Sh::kTileBytes;
  auto bar = [&](Bar kind, int st) { return bar_q + 8 * (1 + kind * S + st); };
  const PrefillBlock blk(p, D, M, N, kCausal);
  if (blk.skip) return;
  const int m0 = blk.m0, lq = blk.lq, lk = blk.lk, shift = blk.shift, n_blocks = blk.n_blocks;
  const int n_tiles = blk.n_tiles;
  const int warp_id = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    tma::mbar_init(bar_q, 1);
    for (int st = 0; st < S; ++st) {
      tma::mbar_init(bar(kFullK, st), 1);
      tma::mbar_init(bar(kFullV, st), 1);
      tma::mbar_init(bar(kEmptyK, st), Sh::kConsumers);
      tma::mbar_init(bar(kEmptyV, st), Sh::kConsumers);
    }
    tma::mbar_fence_init();
  }
  __syncthreads();

  // The loads: q, and tile j of K (or V) into stage j % S of its ring once both consumers
  // have released tile j - S there.
  const int q_tok = p.cu_q[blk.b] + m0, k_tok = p.cu_k[blk.b], hkv = blk.h / p.n_rep;
  auto load_q = [&] {
    tma::mbar_arrive_expect_tx(bar_q, Sh::kQBytes);
    for (int c = 0; c < Sh::kBoxes; ++c) tma::load_3d(s_q + c * (M * 128), &maps.q, 64 * c, blk.h, q_tok, bar_q);
  };
  auto load_tile = [&](const CUtensorMap* map, uint32_t ring, Bar full, Bar empty, int j) {
    const int st = j % S, tok = k_tok + (n_blocks - 1 - j) * N;
    if (j >= S) tma::mbar_wait(bar(empty, st), (j / S - 1) & 1);
    const uint32_t dst = ring + st * Sh::kTileBytes;
    tma::mbar_arrive_expect_tx(bar(full, st), Sh::kTileBytes);
    for (int c = 0; c < Sh::kBoxes; ++c) tma::load_3d(dst + c * (N * 128), map, 64 * c, hkv, tok, bar(full, st));
  };
  auto load_k = [&](int j) { load_tile(&maps.k, s_k, kFullK, kEmptyK, j); };
  auto load_v = [&](int j) { load_tile(&maps.v, s_v, kFullV, kEmptyV, j); };
  if constexpr (Sh::kProducer) {
    if (warp_id >= Sh::kConsumers / 32) {  // the producer warpgroup: gives registers back, one thread loads
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
      if (threadIdx.x == Sh::kConsumers) {
        load_q();
        for (int j = 0; j < n_tiles; ++j) {
          load_k(j);
          load_v(j);
        }
      }
      return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(consumer_regs(Sh::kConsumers, Sh::kMinBlocks)));
  } else if (threadIdx.x == 0) {  // thread 0 loads between its tiles; the first K tiles now
    load_q();
    for (int j = 0; j < S - 1 && j < n_tiles; ++j) load_k(j);
    for (int j = 0; j < S - 2 && j < n_tiles; ++j) load_v(j);
  }

  const int wg = warp_id / 4, warp = warp_id % 4;
  // The thread's rows (block-relative): r0 = 64 wg + 16 warp + lane / 4 and r0 + 8.
  const int r0 = wg * 64 + warp * 16 + lane / 4;
  const int row_wg = m0 + wg * 64;  // the warpgroup's first query row
  float o[D / 2] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  uint32_t pa[N / 16][4];  // P of the previous tile, the A operand of its P V
  // K-major operands (q, k): one k16 step is 32 bytes into a 128-byte row; 4 per 64-column
  // block. q's warpgroup rows start 64 rows (8 KB) into each block. V is MN-major: 64-column
  // blocks N * 128 bytes apart, 8-key groups 1024 bytes apart, 16 keys per step.
  auto q_desc = [&](int kk) {
    return wgmma::desc(s_q + (kk / 4) * (M * 128) + wg * 64 * 128 + (kk % 4) * 32, 16, 1024);
  };
  auto k_desc = [&](uint32_t sk, int kk) { return wgmma::desc(sk + (kk / 4) * (N * 128) + (kk % 4) * 32, 16, 1024); };
  auto v_desc = [&](uint32_t sv, int kk) { return wgmma::desc(sv + kk * 2048, N * 128, 1024); };
  auto issue_pv = [&](int j) {  // P V of tile j, once its V has landed
    tma::mbar_wait(bar(kFullV, j % S), (j / S) & 1);
    const uint32_t sv = s_v + (j % S) * Sh::kTileBytes;
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) wgmma::mma_rs_t<kF16, D>(o, pa[kk], v_desc(sv, kk));
    wgmma::commit();
  };
  tma::mbar_wait(bar_q, 0);

  // KV tiles from the last (the diagonal ones, masked) down to the first.
  const float sl2 = p.scale_log2;
  for (int it = 0; it < n_tiles; ++it) {
    const int n = n_blocks - 1 - it, stage = it % S;
    if constexpr (!Sh::kProducer) {
      // K of tile it + S - 1 into the stage S (it - 1) read, V of tile it + S - 2 into the
      // stage P V (it - 2) read: both released during the last tile.
      if (threadIdx.x == 0) {
        if (it + S - 1 < n_tiles) load_k(it + S - 1);
        if (it + S - 2 >= 0 && it + S - 2 < n_tiles) load_v(it + S - 2);
      }
    }
    tma::mbar_wait(bar(kFullK, stage), (it / S) & 1);
    const uint32_t sk = s_k + stage * Sh::kTileBytes;

    // S = Q Kᵀ for tile it, then P V for tile it - 1, both in flight; wait for S only.
    float s[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s[i] = 0.0f;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) wgmma::mma_ss<kF16, N>(s, q_desc(kk), k_desc(sk, kk));
    wgmma::commit();
    if (it > 0) {
      issue_pv(it - 1);
      wgmma::wait<1>();
    } else {
      wgmma::wait<0>();
    }
    wgmma::fence_operands(s);
    tma::mbar_arrive(bar(kEmptyK, stage));  // S has read K of tile it

    // Masks only where a key can be invisible to one of the warpgroup's rows.
    const int key0 = n * N;
    if (key0 + N > lk || (kCausal && key0 + N - 1 > row_wg + shift)) {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
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
      for (int j = 0; j < N / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.0f : mx * sl2;
      corr[r] = ptx::exp2_fast(m_run[r] * sl2 - base);
      m_run[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = ptx::exp2_fast(fmaf(s[4 * j + 2 * r + e], sl2, -base));
          s[4 * j + 2 * r + e] = x;
          sum += x;
        }
      l_run[r] = l_run[r] * corr[r] + sum;
    }
    wgmma::wait<0>();  // P V of tile it - 1: o and pa are free, and so is its V stage
    wgmma::fence_operands(o);
    if (it > 0) tma::mbar_arrive(bar(kEmptyV, (it - 1) % S));
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= corr[0];
      o[4 * j + 1] *= corr[0];
      o[4 * j + 2] *= corr[1];
      o[4 * j + 3] *= corr[1];
    }
    // P of tile it: its k16 step kk is S's n8 tiles 2 kk and 2 kk + 1.
#pragma unroll
    for (int kk = 0; kk < N / 16; ++kk) {
      pa[kk][0] = ptx::pack<kF16>(s[8 * kk + 0], s[8 * kk + 1]);
      pa[kk][1] = ptx::pack<kF16>(s[8 * kk + 2], s[8 * kk + 3]);
      pa[kk][2] = ptx::pack<kF16>(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = ptx::pack<kF16>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }
  if (n_tiles > 0) {  // P V of the last tile
    wgmma::fence();
    issue_pv(n_tiles - 1);
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
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(dst + j * 8) = ptx::pack<kF16>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
#else
  __trap();  // built for sm_90a only; the host checks the device before launching
#endif
}

// A map of a [tokens, heads, d] 16-bit tensor in boxes of 64 columns x 1 head x `rows`
// tokens. No tokens: a zeroed map, which no block reads (every block has zero key tiles).
bool encode(CUtensorMap* map, const void* base, int tokens, int heads, int d, int rows, bool f16) {
  *map = CUtensorMap{};
  if (tokens <= 0) return true;
  const uint64_t dims[3] = {static_cast<uint64_t>(d), static_cast<uint64_t>(heads), static_cast<uint64_t>(tokens)};
  const uint64_t strides[2] = {static_cast<uint64_t>(d) * 2, static_cast<uint64_t>(heads) * d * 2};
  const uint32_t box[3] = {64, 1, static_cast<uint32_t>(rows)};
  return encode_tensor_map(map, base, 3, dims, strides, box, f16);
}

template <int D, bool kF16, bool kCausal>
int launch_as(const Maps& maps, const PrefillParams& p, void* stream) {
  using Sh = WgPrefill<D>;
  auto* k = prefill_wgmma_kernel<D, kF16, kCausal>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::kSmemBytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  const dim3 grid((p.max_seqlen_q + Sh::kBlockM - 1) / Sh::kBlockM, p.hq, p.batch);
  k<<<grid, Sh::kThreads, Sh::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(maps, p);
  return static_cast<int>(cudaGetLastError());
}

template <int D>
int launch_d(const PrefillParams& p, void* stream) {
  using Sh = WgPrefill<D>;
  Maps maps;
  if (!encode(&maps.q, p.q, p.total_q, p.hq, D, Sh::kBlockM, p.f16) ||
      !encode(&maps.k, p.k, p.total_k, p.hkv, D, Sh::kBlockN, p.f16) ||
      !encode(&maps.v, p.v, p.total_k, p.hkv, D, Sh::kBlockN, p.f16))
    return static_cast<int>(cudaErrorInvalidValue);
  if (p.f16) return p.causal ? launch_as<D, true, true>(maps, p, stream) : launch_as<D, true, false>(maps, p, stream);
  return p.causal ? launch_as<D, false, true>(maps, p, stream) : launch_as<D, false, false>(maps, p, stream);
}

}  // namespace

int launch_prefill_wgmma(const PrefillParams& p, int head_dim, void* stream) {
  if (p.max_seqlen_q <= 0) return 0;
  switch (head_dim) {
    case 64: return launch_d<64>(p, stream);
    case 128: return launch_d<128>(p, stream);
    case 256: return launch_d<256>(p, stream);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace kvf::exec::cuda::detail
