// Split-KV decode on the tensor cores (head dims 64 and 128; docs/cuda.md, "Tensor-core
// decode"). Same grid, splits and partial format as the SIMT kernel (decode_attention.cuh),
// and the same merge of the splits by the last block (decode_merge.cuh).
//
// One block serves up to 16 query rows of one KV head (the n_rep heads of the group times
// Lq): one m16 tile, so S = Q Kᵀ and O += P V are mma.sync m16n8k16 with the group's rows as
// M and each K/V byte read once. Warps own interleaved 16-key tiles of the block's chunk
// (warp w takes tiles w, w + W, ...) with a private cp.async pipeline of S stages, so the
// key loop has no block barrier: cp.async.wait_group + __syncwarp order a warp's copies
// before its ldmatrix reads. Tiles are XOR-swizzled [16, D] rows, read by ldmatrix (K) and
// ldmatrix.trans (V) without bank conflicts. The warps merge (m, l, acc) through shared
// memory at the end.
//
// Precision: the operands are 16-bit, the accumulation f32. q (f32) and P (f32) are each
// split into a 16-bit high part and a 16-bit remainder (x = hi + lo to ~2^-16 relative), and
// both parts are multiplied: twice the MMAs, which the tensor cores have to spare in a
// memory-bound kernel, for scores and outputs as accurate as the f32 SIMT kernel's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "exec/cuda/decode_launch.h"
#include "exec/cuda/decode_merge.cuh"
#include "exec/cuda/mma_ptx.cuh"

namespace kvf::exec::cuda::detail {

// Warps per block and pipeline stages per warp (each warp keeps S - 1 tiles of 16 keys in
// flight). d128 on the H200, dense and paged alike: 8 warps x 2 stages, one block per SM
// (128 KB), so each of the SM's four schedulers has two warps to switch between; against
// 4 x 3 (each at its best split count) it was 1.00-1.02x dense and 1.02-1.04x paged, and
// 6 x 3 and 8 x 3 were no better (docs/benchmarks.md, "Design choices and the measurement behind each"). d64:
// 8 x 3 against 4 x 4 in TinyLlama's decode on an H100, tg128 +1%, at depth 32768 +3.5%,
// 64 paged sequences +2% (8 x 2 spills); dense, 8 x 4 against 8 x 3: tg128 +1.6%, at depth
// 32768 +3.8%, while 64 paged sequences at 8 x 4 lost 7% (one 128 KB block an SM, not two),
// so the paged kernel keeps 3 stages.
template <int D, bool PAGED> struct MmaDecodeShape;
template <bool PAGED> struct MmaDecodeShape<64, PAGED> { static constexpr int kWarps = 8, kStages = PAGED ? 3 : 4; };
template <bool PAGED> struct MmaDecodeShape<128, PAGED> { static constexpr int kWarps = 8, kStages = 2; };

template <int D, bool PAGED>
struct MmaDecode {
  static constexpr int kWarps = MmaDecodeShape<D, PAGED>::kWarps, kStages = MmaDecodeShape<D, PAGED>::kStages;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = 16;  // query rows per block: one m16 tile
  static constexpr int kKeys = 16;  // keys per warp tile: the k of the P V MMA
  static constexpr int kKeysPerIter = kKeys * kWarps;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per key row
  static constexpr int kTileBytes = kKeys * D * 2;
  static constexpr int kStageBytes = 2 * kTileBytes;  // K then V
  static constexpr int kPipeBytes = kWarps * kStages * kStageBytes;
  // Paged: each warp's ring of read-map entries [kMapRing][16] (i32) after the pipelines; a
  // tile's entries are copied kMapRing - 1 tiles before its K/V (docs/cuda.md).
  static constexpr int kMapRing = 8;
  static constexpr int kMapBytes = kWarps * kMapRing * kKeys * 4;
  // A mask's values of each stage's keys [kWarps][kStages][16] (f32), copied with its K/V.
  static constexpr int kMaskBytes = kWarps * kStages * kKeys * 4;
  static constexpr int kMergeBytes = kWarps * kRows * (D + 2) * 4;
  static constexpr int kSmemBytes = (kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes) + kMaskBytes + kMapBytes;
  static_assert(kSmemBytes <= 227 * 1024, "a block's shared memory fits an SM (227 KB on sm_90)");
  static constexpr int kMinBlocks = (227 * 1024) / kSmemBytes;
  static_assert(kChunks % 4 == 0 && kChunks >= 8, "the swizzle needs >= 8 chunks per row");
  static_assert(kStages >= 2, "at least one tile in flight");
  static_assert(kMapRing >= kStages, "a tile's map entries land no later than the tile kStages - 1 before it");
};

template <typename T, int D, bool PAGED>
__global__ void __launch_bounds__(MmaDecode<D, PAGED>::kThreads, MmaDecode<D, PAGED>::kMinBlocks)
    decode_mma_kernel(const DecodeParams p) {
  using Tr = MmaDecode<D, PAGED>;
  using namespace ptx;
  constexpr bool kF16 = std::is_same_v<T, __half>;
  constexpr int W = Tr::kWarps, S = Tr::kStages, KT = D / 16;
  extern __shared__ __align__(128) unsigned char mma_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Launched as a programmatic dependent: what the kernel in front writes is read after its
  // wait. Where the host says which keys that is (and that else it writes only q), the
  // older keys' first tiles are issued before the wait.
  const bool early = p.written_from != nullptr || p.written_slots != nullptr;
  if (!early) await_kernel_in_front();
  const SplitBlock blk(p);
  const int rb = blk.rb, hkv = blk.hkv, b = blk.b, len = blk.len, t0 = blk.t0, t1 = blk.t1;
  auto tile_start = [&](int it) { return t0 + (warp + it * W) * Tr::kKeys; };

  // Paged: the pool rows of tile X are copied into ring slot X % R by the issue of tile
  // X - R + 1 (one commit group with its K/V) and read back by the issue of tile X, which
  // runs after wait_group has seen that group land: the dependent map -> K/V chain gets
  // R - 1 tiles of lead instead of stalling every issue. The first R - 1 tiles' entries are
  // copied before the row's length is known (any entry below map_stride is in bounds), so
  // the length and the map arrive in one round trip, and the first K/V loads wait for one
  // dependent load, as the dense kernel's do.
  constexpr int R = Tr::kMapRing;
  const int32_t* map = PAGED ? p.map + static_cast<size_t>(b) * p.map_stride : nullptr;
  const uint32_t s_map = static_cast<uint32_t>(__cvta_generic_to_shared(mma_smem)) +
                         (Tr::kSmemBytes - Tr::kMapBytes) + warp * R * Tr::kKeys * 4;
  const int* map_ring = reinterpret_cast<const int*>(mma_smem + (Tr::kSmemBytes - Tr::kMapBytes)) + warp * R * Tr::kKeys;
  auto copy_map = [&](int it, int end) {  // entries of keys below end (<= map_stride)
    if (lane < Tr::kKeys) {
      const int t = tile_start(it) + lane;
      const bool ok = t < end;
      cp_async4(s_map + ((it % R) * Tr::kKeys + lane) * 4, map + (ok ? t : 0), ok ? 4 : 0);
    }
  };
  if constexpr (PAGED) {
    for (int it = 0; it < R - 1; ++it) copy_map(it, p.map_stride);
    commit();
  }
  // The pool rows the kernel in front writes (at most 64), lane j holding j and j + 32.
  int written[2] = {-1, -1};
  if (PAGED && p.written_slots != nullptr)
    for (int j = 0; j < 2; ++j)
      if (lane + 32 * j < p.written_slot_count) written[j] = p.written_slots[lane + 32 * j];
  if (blk.skip) {
    wait<0>();
    return;
  }
  const int qr = p.n_rep * p.lq;
  const bool extras = blk.extras;
  const float qscale = blk.qscale;
  // A mask whose rows are whole 16-byte vectors travels with the tile's K/V (one copy of 4
  // keys a lane for 4 lanes): a load of it beside the scores would wait out a memory
  // latency every tile.
  const bool staged_mask = p.mask != nullptr && p.mask_stride % 4 == 0 && (PAGED ? p.map_stride : p.cap) % 4 == 0 &&
                           (reinterpret_cast<uintptr_t>(p.mask) & 15) == 0;
  const uint32_t s_mask = static_cast<uint32_t>(__cvta_generic_to_shared(mma_smem)) +
                          (Tr::kSmemBytes - Tr::kMapBytes - Tr::kMaskBytes) + warp * S * Tr::kKeys * 4;
  const float* mask_ring =
      reinterpret_cast<const float*>(mma_smem + (Tr::kSmemBytes - Tr::kMapBytes - Tr::kMaskBytes)) + warp * S * Tr::kKeys;
  const float* mask_row = p.mask != nullptr ? p.mask + static_cast<size_t>(b) * p.mask_stride : nullptr;

  // The thread's two rows of the m16 tile (C layout): g and g + 8.
  const int g = lane / 4, c4 = lane % 4;
  int hi[2], lo[2];
  float slope[2];
  const float* qrow[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int gr = rb * Tr::kRows + g + 8 * j;
    const bool real = gr < qr;
    const int pos = len - p.lq + gr % p.lq, h = hkv * p.n_rep + gr / p.lq;
    hi[j] = real ? pos : -1;  // last visible key (inclusive)
    lo[j] = p.window > 0 ? pos - p.window : -1;  // keys must be > lo
    slope[j] = (p.alibi != nullptr && real) ? p.alibi[h] : 0.0f;
    qrow[j] = real ? p.q + ((static_cast<size_t>(b) * p.hq + h) * p.lq + gr % p.lq) * D : nullptr;
  }
  int min_hi = 0x7fffffff, max_lo = -1;  // over the block's real rows: keys in (max_lo, min_hi] are seen by all
  for (int r = 0; r < Tr::kRows && rb * Tr::kRows + r < qr; ++r) {
    const int pos = len - p.lq + (rb * Tr::kRows + r) % p.lq;
    min_hi = min(min_hi, pos);
    max_lo = max(max_lo, p.window > 0 ? pos - p.window : -1);
  }

  const uint16_t* kbase;
  const uint16_t* vbase;
  size_t kstride;
  if (PAGED && !p.map_positions) {
    kbase = static_cast<const uint16_t*>(p.k) + static_cast<size_t>(hkv) * D;
    vbase = static_cast<const uint16_t*>(p.v) + static_cast<size_t>(hkv) * D;
    kstride = static_cast<size_t>(p.hkv) * D;
  } else {  // a dense cache, read in order or through a map of its positions
    const size_t row = (static_cast<size_t>(b) * p.hkv + hkv) * p.cap;
    kbase = static_cast<const uint16_t*>(p.k) + row * D;
    vbase = static_cast<const uint16_t*>(p.v) + row * D;
    kstride = D;
  }

  const int n_tiles = (t1 - t0 + Tr::kKeys - 1) / Tr::kKeys;
  const int n_it = n_tiles > warp ? (n_tiles - warp + W - 1) / W : 0;
  const uint32_t s_pipe = static_cast<uint32_t>(__cvta_generic_to_shared(mma_smem)) + warp * S * Tr::kStageBytes;
  auto issue = [&](int it) {
    const uint32_t sk = s_pipe + (it % S) * Tr::kStageBytes, sv = sk + Tr::kTileBytes;
    const int tb = tile_start(it);
#pragma unroll
    for (int i = 0; i < Tr::kChunks / 2; ++i) {
      const int idx = lane + 32 * i, r = idx / Tr::kChunks, c = idx % Tr::kChunks;
      const bool ok = it < n_it && tb + r < t1;
      int row = tb + r;
      if constexpr (PAGED) row = map_ring[(it % R) * Tr::kKeys + r];
      const size_t at = (ok ? static_cast<size_t>(row) : 0) * kstride + c * 8;
      cp_async16(sk + swz<D>(r, c), kbase + at, ok ? 16 : 0);
      cp_async16(sv + swz<D>(r, c), vbase + at, ok ? 16 : 0);
    }
    if (staged_mask && lane < Tr::kKeys / 4) {  // keys t..t+3 lie in the row when t does (t1 <= its width, a multiple of 4)
      const int t = tb + 4 * lane;
      const bool ok = it < n_it && t < t1;
      cp_async16(s_mask + ((it % S) * Tr::kKeys + 4 * lane) * 4, mask_row + (ok ? t : 0), ok ? 16 : 0);
    }
    if constexpr (PAGED) {
      __syncwarp();  // every lane has read slot it % R: tile it + R - 1 reuses slot (it - 1) % R, read last issue
      copy_map(it + R - 1, it + R - 1 < n_it ? t1 : 0);
    }
    commit();  // empty past n_it, so the group count stays uniform
  };
  if constexpr (PAGED) {
    wait<0>();  // the prologue's map entries
    __syncwarp();
  }
  // A warp whose first S - 1 tiles hold only keys the kernel in front leaves alone has
  // them on the way while that kernel ends (warp-uniform).
  bool ahead = early;
  if (p.written_from != nullptr) ahead = min(tile_start(S - 2) + Tr::kKeys, t1) <= *p.written_from;
  if (PAGED && p.written_slots != nullptr) {
    bool hit = false;
    for (int e0 = 0; e0 < (S - 1) * Tr::kKeys; e0 += 32) {
      const int e = e0 + lane, it = e / Tr::kKeys, r = e % Tr::kKeys;
      const bool read = e < (S - 1) * Tr::kKeys && it < n_it && tile_start(it) + r < t1;
      const int row = read ? map_ring[(it % R) * Tr::kKeys + r] : -1;
      for (int j = 0; j < 32; ++j) {
        const int w0 = __shfl_sync(0xffffffffu, written[0], j), w1 = __shfl_sync(0xffffffffu, written[1], j);
        hit = hit || (read && (row == w0 || row == w1));
      }
    }
    ahead = !__any_sync(0xffffffffu, hit);
  }
  auto issue_first = [&] {
#pragma unroll
    for (int it = 0; it < S - 1; ++it) issue(it);
  };
  if (ahead) issue_first();
  if (early) await_kernel_in_front();
  if (!ahead) issue_first();

  // q as A fragments (a0: row g, a1: row g + 8, a2/a3: the same rows 8 columns on), loaded
  // while the first tiles are in flight, pre-scaled into the log2 domain, split into 16-bit
  // high and low parts.
  uint32_t qh[KT][4], ql[KT][4];
#pragma unroll
  for (int kk = 0; kk < KT; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float* src = qrow[e & 1];
      float2 x = src ? *reinterpret_cast<const float2*>(src + kk * 16 + 2 * c4 + (e >> 1) * 8) : make_float2(0.0f, 0.0f);
      x.x *= qscale;
      x.y *= qscale;
      qh[kk][e] = pack<kF16>(x.x, x.y);
      ql[kk][e] = pack<kF16>(x.x - round16<kF16>(x.x), x.y - round16<kF16>(x.y));
    }

  // ldmatrix lanes: K (B of Q Kᵀ) keys (lane / 16) * 8 + lane % 8, chunk 2 kk + (lane / 8) % 2;
  // V (B of P V, transposed) keys ((lane / 8) % 2) * 8 + lane % 8, chunk 2 dd + lane / 16.
  const uint32_t k_row = static_cast<uint32_t>(((lane / 16) * 8 + lane % 8) * D * 2);
  const uint32_t v_row = static_cast<uint32_t>((((lane / 8) % 2) * 8 + lane % 8) * D * 2);
  const LaneChunks k_ch(((lane / 8) % 2) ^ (lane % 8)), v_ch((lane / 16) ^ (lane % 8));

  float o[D / 8][4] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  for (int it = 0; it < n_it; ++it) {
    wait<S - 2>();  // tile `it` has landed (this lane's copies)
    __syncwarp();   // ... and every lane's; and every lane is done reading tile it - 1
    issue(it + S - 1);
    const uint32_t sk = s_pipe + (it % S) * Tr::kStageBytes, sv = sk + Tr::kTileBytes;

    // S = Q Kᵀ for 16 rows x 16 keys: s[n] holds keys n * 8 + 2 c4 + {0, 1} of rows g, g + 8.
    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4(sk + k_row + k_ch.at(kk), b0, b1, b2, b3);
      mma<kF16>(s[0], qh[kk], b0, b1);
      mma<kF16>(s[1], qh[kk], b2, b3);
      mma<kF16>(s[0], ql[kk], b0, b1);
      mma<kF16>(s[1], ql[kk], b2, b3);
    }
    // Masks only where a key of this tile is past t1 or hidden from some row (warp-uniform).
    const int tb = tile_start(it);
    if (extras || tb + Tr::kKeys > t1 || tb + Tr::kKeys - 1 > min_hi || tb <= max_lo) {
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = tb + n * 8 + 2 * c4 + (e & 1), j = e >> 1;
          float x = s[n][e];
          if (extras) {
            const int at = (it % S) * Tr::kKeys + n * 8 + 2 * c4 + (e & 1);
            const float add = (mask_row == nullptr || t >= t1) ? 0.0f : staged_mask ? mask_ring[at] : __ldg(mask_row + t);
            if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
            x = (x + slope[j] * static_cast<float>(t - hi[j]) + add) * kLog2e;
          }
          s[n][e] = (t < t1 && t <= hi[j] && t > lo[j]) ? x : -INFINITY;
        }
    }
    // Online softmax of rows g and g + 8 (a row's 16 keys sit in the 4 lanes of a quad).
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float mx = fmaxf(m_run[j], fmaxf(fmaxf(s[0][2 * j], s[0][2 * j + 1]), fmaxf(s[1][2 * j], s[1][2 * j + 1])));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.0f : mx;  // nothing visible yet: p = 0, corr = 0
      const float corr = exp2_fast(m_run[j] - base);
      m_run[j] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = exp2_fast(s[n][2 * j + e] - base);
          s[n][2 * j + e] = x;
          sum += x;
        }
      l_run[j] = l_run[j] * corr + sum;
#pragma unroll
      for (int nt = 0; nt < D / 8; ++nt) {
        o[nt][2 * j] *= corr;
        o[nt][2 * j + 1] *= corr;
      }
    }
    // O += P V: P's C layout is the A layout (keys 0-7 in a0/a1, 8-15 in a2/a3).
    uint32_t ph[4], pl[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float x = s[e >> 1][2 * (e & 1)], y = s[e >> 1][2 * (e & 1) + 1];
      ph[e] = pack<kF16>(x, y);
      pl[e] = pack<kF16>(x - round16<kF16>(x), y - round16<kF16>(y));
    }
#pragma unroll
    for (int dd = 0; dd < KT; ++dd) {
      uint32_t b0, b1, b2, b3;
      ldsm_x4_t(sv + v_row + v_ch.at(dd), b0, b1, b2, b3);
      mma<kF16>(o[2 * dd], ph, b0, b1);
      mma<kF16>(o[2 * dd + 1], ph, b2, b3);
      mma<kF16>(o[2 * dd], pl, b0, b1);
      mma<kF16>(o[2 * dd + 1], pl, b2, b3);
    }
  }
  wait<0>();
  __syncthreads();  // the merge reuses the pipelines' shared memory

  // Merge the warps: (m, l) [W][16][2], acc [W][16][D] f32.
  float* red_ml = reinterpret_cast<float*>(mma_smem);
  float* red_acc = red_ml + W * Tr::kRows * 2;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float l = l_run[j];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = warp * Tr::kRows + g + 8 * j;
    if (c4 == 0) {
      red_ml[row * 2] = m_run[j];
      red_ml[row * 2 + 1] = l;
    }
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt)
      *reinterpret_cast<float2*>(red_acc + row * D + nt * 8 + 2 * c4) = make_float2(o[nt][2 * j], o[nt][2 * j + 1]);
  }
  __syncthreads();
  merge_and_store<D>(p, blk, red_ml, red_acc, W, Tr::kRows);
}

template <typename T, int D, bool PAGED>
cudaError_t prepare_mma() {
  static const cudaError_t e = cudaFuncSetAttribute(
      decode_mma_kernel<T, D, PAGED>, cudaFuncAttributeMaxDynamicSharedMemorySize, MmaDecode<D, PAGED>::kSmemBytes);
  return e;
}

template <typename T, int D, bool PAGED>
cudaError_t launch_mma(const DecodeParams& p, cudaStream_t st) {
  if (const cudaError_t e = prepare_mma<T, D, PAGED>(); e != cudaSuccess) return e;
  const dim3 grid(p.splits * p.row_blocks, p.hkv, p.batch);
  return launch_programmatic(decode_mma_kernel<T, D, PAGED>, grid, dim3(MmaDecode<D, PAGED>::kThreads),
                             MmaDecode<D, PAGED>::kSmemBytes, st, p.programmatic != 0, p);
}

// Resident blocks per multiprocessor (bf16 and f16 share their resources).
template <int D, bool PAGED>
int mma_blocks_per_sm_as() {
  if (prepare_mma<__nv_bfloat16, D, PAGED>() != cudaSuccess) return 0;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_mma_kernel<__nv_bfloat16, D, PAGED>,
                                                    MmaDecode<D, PAGED>::kThreads,
                                                    MmaDecode<D, PAGED>::kSmemBytes) != cudaSuccess)
    return 0;
  return n;
}
template <int D>
int mma_blocks_per_sm(bool paged) {
  return paged ? mma_blocks_per_sm_as<D, true>() : mma_blocks_per_sm_as<D, false>();
}

}  // namespace kvf::exec::cuda::detail
