// The tensor-core prefill kernel (FlashAttention-2 style, mma.sync m16n8k16): one block per
// (block of kBlockM query rows, query head, sequence); each warp owns 16 query rows. K/V
// tiles of kBlockN keys are double-buffered in shared memory with cp.async; S = Q Kᵀ and
// O += P V run on the tensor cores from ldmatrix fragments; the online softmax lives in
// registers (no score matrix in memory). Not here: wgmma/TMA (sm_90a) — later work.
#pragma once

#include <cstdint>
#include <type_traits>

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/prefill_block.cuh"
#include "exec/cuda/prefill_launch.h"

namespace kvf::exec::cuda::detail {

// Tile shapes of one head dim; everything else derives from them.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocks_, bool kQInRegs_>
struct PrefillTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;   // query rows per block
  static constexpr int kBlockN = kBlockN_;   // keys per K/V tile
  static constexpr int kWarps = kWarps_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kMT = kBlockM / (16 * kWarps);  // m16 tiles per warp (each K/V fragment feeds kMT MMAs)
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunks = kHeadDim / 8;                 // 16-byte chunks per row
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;    // one K or V tile
  static constexpr int kSmemBytes = kQBytes + 4 * kTileBytes;  // q + (k, v) x 2 stages
  static constexpr bool kQInRegs = kQInRegs_;  // q fragments kept in registers, else re-read (ldmatrix)
  static_assert(kBlockM % (16 * kWarps) == 0, "a warp owns kMT x 16 query rows");
  static_assert(!kQInRegs || kMT == 1, "q in registers only for one m tile per warp");
  static_assert(kBlockN % 16 == 0, "tiles of the MMA's K");
  static_assert(kHeadDim % 64 == 0, "the swizzle needs >= 8 chunks per row");
};

// The shape table: one entry per head dim (docs/cuda.md, "Prefill on mma.sync"). Registers from
// `nvcc -Xptxas -v` (sm_90, no spills; a spill fails the build):
//   d64:  64 x 64, 4 warps x 16 rows, q in registers, 142 registers, 40 KB smem, 3 blocks/SM.
//   d128: 128 x 32, 4 warps x 32 rows (2 m tiles: each K/V fragment feeds 2 MMAs), q re-read
//         from smem, 245 registers, 64 KB smem, 2 blocks/SM. Measured on the H200 (TFLOP/s,
//         B 1, 32/8 heads, causal 16k / full 16k): 276 / 283; 64 x 64 x 4 warps x 16 rows
//         (q in registers, 198 registers, 2 blocks/SM): 257 / 260; 128 x 64 x 8 warps: 263 /
//         270; 256 x 32 x 8 warps x 32 rows: 265 / 275; 64 x 32, 3 blocks/SM: 233 / 244.
//         128 x 64 x 4 warps x 32 rows spills (255 registers).
//   d256: 64 x 32, 4 warps x 16 rows, q re-read from smem, 239 registers, 96 KB smem, 2 blocks/SM.
template <int D> struct PrefillTraitsFor;
template <> struct PrefillTraitsFor<64> : PrefillTraits<64, 64, 64, 4, 3, true> {};
template <> struct PrefillTraitsFor<128> : PrefillTraits<128, 128, 32, 4, 2, false> {};
template <> struct PrefillTraitsFor<256> : PrefillTraits<256, 64, 32, 4, 2, false> {};

namespace prefill {

using ptx::commit;
using ptx::cp_async16;
using ptx::exp2_fast;
using ptx::LaneChunks;
using ptx::ldsm_x4;
using ptx::ldsm_x4_t;
using ptx::mma;
using ptx::pack;
using ptx::swz;
using ptx::wait;

// Copies `rows` rows of D 16-bit values (global stride `stride` elements) into a swizzled
// tile; rows at or past `valid` are zero-filled (their source is not read).
template <class Tr>
__device__ __forceinline__ void load_tile(uint32_t dst, const uint16_t* src, int64_t stride, int rows, int valid) {
  for (int i = threadIdx.x; i < rows * Tr::kChunks; i += Tr::kThreads) {
    const int r = i / Tr::kChunks, c = i % Tr::kChunks;
    const bool ok = r < valid;
    cp_async16(dst + swz<Tr::kHeadDim>(r, c), src + (ok ? r : 0) * stride + c * 8, ok ? 16 : 0);
  }
}

// The same tile from f32 rows, rounded to the 16-bit type on the way (plain loads and
// stores: q is read once per block).
template <class Tr, bool kF16>
__device__ __forceinline__ void load_tile(uint32_t dst, const float* src, int64_t stride, int rows, int valid) {
  for (int i = threadIdx.x; i < rows * Tr::kChunks; i += Tr::kThreads) {
    const int r = i / Tr::kChunks, c = i % Tr::kChunks;
    uint32_t w[4] = {};
    if (r < valid) {
      const float4* x = reinterpret_cast<const float4*>(src + r * stride + c * 8);
      const float4 a = x[0], b = x[1];
      w[0] = pack<kF16>(a.x, a.y);
      w[1] = pack<kF16>(a.z, a.w);
      w[2] = pack<kF16>(b.x, b.y);
      w[3] = pack<kF16>(b.z, b.w);
    }
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst + swz<Tr::kHeadDim>(r, c)), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3]));
  }
}

// Two normalized outputs at `dst`: a 16-bit pair, or two floats.
template <bool kF16>
__device__ __forceinline__ void store_pair(uint16_t* dst, float a, float b) {
  *reinterpret_cast<uint32_t*>(dst) = pack<kF16>(a, b);
}
template <bool kF16>
__device__ __forceinline__ void store_pair(float* dst, float a, float b) {
  *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}

}  // namespace prefill

// Block: where the block's rows and keys are and what they hold (prefill_block.cuh):
// PrefillBlock for the varlen API, StepBlock for the step executor.
template <class Tr, bool kF16, bool kCausal, class Block = PrefillBlock>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocks) prefill_kernel(const typename Block::Params a) {
  using namespace prefill;
  constexpr int D = Tr::kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, MT = Tr::kMT;
  extern __shared__ __align__(128) unsigned char smem[];
  const PrefillParams& p = Block::base(a);
  const Block blk(a, D, BM, BN, kCausal);
  if (blk.skip) return;
  const int m0 = blk.m0, lq = blk.lq, lk = blk.lk, n_blocks = blk.n_blocks;
  const int n_tiles = blk.n_tiles;
  const ScoreMods mods(p, blk.h, lk, kCausal);
  const float sl2 = mods.softmax_scale(p);
  const int64_t q_stride = blk.q_stride, kv_stride = blk.kv_stride;
  const uint16_t *kg = blk.kg, *vg = blk.vg;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const uint32_t s_q = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t s_k = s_q + Tr::kQBytes, s_v = s_k + 2 * Tr::kTileBytes;
  auto load_kv = [&](int n, int stage) {
    const int valid = min(BN, lk - n * BN);
    load_tile<Tr>(s_k + stage * Tr::kTileBytes, kg + n * BN * kv_stride, kv_stride, BN, valid);
    load_tile<Tr>(s_v + stage * Tr::kTileBytes, vg + n * BN * kv_stride, kv_stride, BN, valid);
  };
  if constexpr (std::is_same_v<decltype(blk.qg), const float*>) {
    load_tile<Tr, kF16>(s_q, blk.qg, q_stride, BM, lq - m0);
  } else {
    load_tile<Tr>(s_q, blk.qg, q_stride, BM, lq - m0);
  }
  if (n_tiles > 0) load_kv(n_blocks - 1, 0);
  commit();

  float o[MT][D / 8][4] = {};
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_run[mt][r] = -INFINITY;
      l_run[mt][r] = 0.0f;
    }
  uint32_t qf[Tr::kQInRegs ? D / 16 : 1][4];
  const int row_w = m0 + warp * MT * 16;  // the warp's first query row
  const int diagonal = blk.least_pos(row_w, MT * 16);  // keys past it are hidden from some row
  int row_pos[MT][2];                                   // the positions of the thread's rows
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) row_pos[mt][r] = blk.pos(row_w + mt * 16 + lane / 4 + r * 8);
  // ldmatrix lane addresses: q (A, rows lane % 16, chunk 2 kk + lane / 16), k (B, keys
  // (lane / 16) * 8 + lane % 8, chunk 2 kk + (lane / 8) % 2), v (B transposed, keys lane % 16
  // in the order of (lane / 8) % 2 * 8 + lane % 8, chunk 2 dd + lane / 16).
  const uint32_t q_row = static_cast<uint32_t>((warp * MT * 16 + lane % 16) * D * 2);
  const uint32_t k_row = static_cast<uint32_t>(((lane / 16) * 8 + lane % 8) * D * 2);
  const uint32_t v_row = static_cast<uint32_t>(((lane / 8) % 2 * 8 + lane % 8) * D * 2);
  const LaneChunks qv_ch((lane / 16) ^ (lane % 8)), k_ch(((lane / 8) % 2) ^ (lane % 8));

  // KV tiles from the last (the diagonal ones, masked) down to the first.
  for (int it = 0; it < n_tiles; ++it) {
    const int n = n_blocks - 1 - it, stage = it & 1;
    if (it + 1 < n_tiles) {
      load_kv(n - 1, stage ^ 1);
      commit();
      wait<1>();
    } else {
      wait<0>();
    }
    __syncthreads();
    if constexpr (Tr::kQInRegs) {
      if (it == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          ldsm_x4(s_q + q_row + qv_ch.at(kk), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
      }
    }
    const uint32_t sk = s_k + stage * Tr::kTileBytes, sv = s_v + stage * Tr::kTileBytes;

    // S = Q Kᵀ: this warp's MT x 16 rows x BN keys.
    float s[MT][BN / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Tr::kQInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][i] = qf[kk][i];
        } else {
          ldsm_x4(s_q + q_row + mt * 16 * D * 2 + qv_ch.at(kk), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
        }
      }
#pragma unroll
      for (int nn = 0; nn < BN / 16; ++nn) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(sk + k_row + nn * 16 * D * 2 + k_ch.at(kk), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma<kF16>(s[mt][2 * nn], a[mt], b0, b1);
          mma<kF16>(s[mt][2 * nn + 1], a[mt], b2, b3);
        }
      }
    }

    // Masks only where a key can be invisible to one of the warp's rows: past lk, or above
    // the diagonal.
    const int key0 = n * BN;
    if (mods.every_tile() || key0 + BN > lk || (kCausal && key0 + BN - 1 > diagonal)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + j * 8 + 2 * (lane % 4) + (e & 1);
            s[mt][j][e] = mods(s[mt][j][e], key, row_pos[mt][e / 2]);
          }
    }

    // Online softmax of the thread's rows (lane / 4 and lane / 4 + 8 of each m tile), log2 domain.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m_run[mt][r];
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = mx == -INFINITY ? 0.0f : mx * sl2;
        const float corr = exp2_fast(m_run[mt][r] * sl2 - base);
        m_run[mt][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float x = exp2_fast(fmaf(s[mt][j][2 * r + e], sl2, -base));
            s[mt][j][2 * r + e] = x;
            sum += x;
          }
        l_run[mt][r] = l_run[mt][r] * corr + sum;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          o[mt][j][2 * r] *= corr;
          o[mt][j][2 * r + 1] *= corr;
        }
      }

    // O += P V: P from the S accumulators (the m16n8 C layout is the A layout's halves).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = pack<kF16>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack<kF16>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack<kF16>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack<kF16>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(sv + v_row + kk * 16 * D * 2 + qv_ch.at(dd), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma<kF16>(o[mt][2 * dd], a[mt], b0, b1);
          mma<kF16>(o[mt][2 * dd + 1], a[mt], b2, b3);
        }
      }
    }
    __syncthreads();  // the next iteration's copies overwrite this stage
  }
  wait<0>();  // no copy outlives the block (n_tiles == 0 leaves the q copies unwaited)

  // Normalize and store; a row that saw no key gets zeros.
  auto* og = blk.out(a);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = l_run[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = warp * MT * 16 + mt * 16 + lane / 4 + r * 8;
      if (m0 + row >= lq) continue;
      auto* dst = og + row * q_stride + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < D / 8; ++j) store_pair<kF16>(dst + j * 8, o[mt][j][2 * r] * inv, o[mt][j][2 * r + 1] * inv);
    }
}

template <class Tr, bool kF16, bool kCausal>
int launch_prefill_as(const PrefillParams& p, void* stream) {
  auto* k = prefill_kernel<Tr, kF16, kCausal>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.hq, p.batch);
  k<<<grid, Tr::kThreads, Tr::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

// The step executor's causal prefill over its f16/bf16 cache.
template <class Tr>
int launch_step_prefill_as(const StepPrefillParams& s, void* stream) {
  const PrefillParams& p = s.p;
  if (p.max_seqlen_q <= 0) return 0;
  auto* k = p.f16 ? prefill_kernel<Tr, true, true, StepBlock> : prefill_kernel<Tr, false, true, StepBlock>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return static_cast<int>(e);
  const dim3 grid((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM, p.hq, p.batch);
  k<<<grid, Tr::kThreads, Tr::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(s);
  return static_cast<int>(cudaGetLastError());
}

template <class Tr>
int launch_prefill(const PrefillParams& p, void* stream) {
  if (p.max_seqlen_q <= 0) return 0;
  if (p.f16) return p.causal ? launch_prefill_as<Tr, true, true>(p, stream) : launch_prefill_as<Tr, true, false>(p, stream);
  return p.causal ? launch_prefill_as<Tr, false, true>(p, stream) : launch_prefill_as<Tr, false, false>(p, stream);
}

}  // namespace kvf::exec::cuda::detail
