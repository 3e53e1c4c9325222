// Split-KV decode attention (Flash-Decoding), one instantiation per head-dim pair per .cu.
//
// Grid: x = split * row_blocks + row_block, y = KV head, z = batch row. One block of
// kThreads threads serves up to RB query rows (the n_rep heads of its KV group times Lq), so
// each K/V byte of a split is read from memory once. Inside the block G threads share a key:
// each holds 16 bytes (8 elements) of it per vector, so a key row is read with coalesced
// 16-byte loads; kThreads / G keys are in flight per pass and the pass is unrolled U times,
// all loads issued before the first use. Scores are reduced across the G lanes with xor
// shuffles; the online softmax rescales once per U keys. At the end the block's groups are
// merged through shared memory and the block writes either the final rows (one split) or
// an unnormalized partial (acc, max, sum) that the row's last split block merges
// (decode_merge.cuh). Scores live in the log2 domain (exp2f).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/decode_launch.h"
#include "exec/cuda/decode_merge.cuh"
#include "exec/cuda/decode_mma.cuh"

namespace kvf::exec::cuda::detail {

inline constexpr int kThreads = 128;

// Tile shapes for one (dk, dv) pair: threads per key G, unroll U, most rows per block.
template <int DK, int DV>
struct Tile;
// S: cp.async pipeline stages (each thread keeps (S - 1) * U keys in flight).
template <> struct Tile<64, 64>   { static constexpr int G = 8,  U = 4, S = 3, kMaxRows = 8; };
template <> struct Tile<128, 128> { static constexpr int G = 8,  U = 2, S = 4, kMaxRows = 8; };
template <> struct Tile<256, 256> { static constexpr int G = 32, U = 4, S = 3, kMaxRows = 8; };
template <> struct Tile<192, 128> { static constexpr int G = 8,  U = 2, S = 3, kMaxRows = 4; };

template <int DK, int DV>
constexpr int keys_per_iter() { return (kThreads / Tile<DK, DV>::G) * Tile<DK, DV>::U; }

// q rows [rows][DK] f32, then one region used twice: first the K/V pipeline
// [S][U][NK + NV][kThreads] 16-byte slots, then the group merge: (m, l) [kThreads/G][rows][2]
// and accs [kThreads/G][rows][DV] f32.
template <int DK, int DV>
constexpr int pipe_bytes() {
  using Tl = Tile<DK, DV>;
  return Tl::S * Tl::U * (DK + DV) / (8 * Tl::G) * kThreads * 16;
}
template <int DK, int DV>
constexpr int smem_bytes(int rows) {
  constexpr int groups = kThreads / Tile<DK, DV>::G;
  const int merge = 4 * (groups * rows * 2 + groups * rows * DV);
  return 4 * rows * DK + (merge > pipe_bytes<DK, DV>() ? merge : pipe_bytes<DK, DV>());
}

// 16-byte global -> shared copy that bypasses L1; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

__device__ __forceinline__ uint4 load_nc(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

template <typename T>
__device__ __forceinline__ void to_float8(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 2 && std::is_same_v<T, __nv_bfloat16>) {
      // bf16 -> f32 is a shift: the low half is element 2i, the high half element 2i+1.
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      __half2 h = *reinterpret_cast<const __half2*>(&w[i]);
      float2 x = __half22float2(h);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
}

template <typename T, int DK, int DV, int RB, bool PAGED>
__global__ void __launch_bounds__(kThreads, RB >= 8 ? 1 : 3) decode_split_kernel(const DecodeParams p) {
  constexpr int G = Tile<DK, DV>::G, U = Tile<DK, DV>::U;
  constexpr int NK = DK / (8 * G), NV = DV / (8 * G);
  constexpr int KPP = kThreads / G;
  static_assert(NK * 8 * G == DK && NV * 8 * G == DV, "head dims must be whole 16-byte vectors per lane");
  static_assert(32 % G == 0, "a key's lanes sit in one warp");

  constexpr int S = Tile<DK, DV>::S;
  extern __shared__ __align__(16) float smem[];
  float* q_s = smem;                       // [RB][DK], pre-scaled
  uint4* pipe = reinterpret_cast<uint4*>(q_s + RB * DK);  // [S][U][NK + NV][kThreads]
  float* red_ml = q_s + RB * DK;           // [KPP][RB][2]   (after the pipeline is drained)
  float* red_acc = red_ml + KPP * RB * 2;  // [KPP][RB][DV]

  await_kernel_in_front();  // launched as a programmatic dependent: q, K, V and the lengths come after
  const SplitBlock blk(p);
  if (blk.skip) return;
  const int rb = blk.rb, hkv = blk.hkv, b = blk.b, len = blk.len, t0 = blk.t0, t1 = blk.t1;
  const int qr = p.n_rep * p.lq;
  const bool extras = blk.extras;
  const float qscale = blk.qscale;

  for (int idx = threadIdx.x; idx < RB * DK; idx += kThreads) {
    const int r = idx / DK, d = idx % DK, gr = rb * RB + r;
    float x = 0.0f;
    if (gr < qr) {
      const int h = hkv * p.n_rep + gr / p.lq, i = gr % p.lq;
      x = p.q[((static_cast<size_t>(b) * p.hq + h) * p.lq + i) * DK + d] * qscale;
    }
    q_s[idx] = x;
  }
  int hi[RB], lo[RB];
  float slope[RB];
  int min_hi = 0x7fffffff, max_lo = -1;  // over the real rows: keys in (max_lo, min_hi] are seen by all
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    const int gr = rb * RB + r;
    const int pos = len - p.lq + gr % p.lq;
    hi[r] = gr < qr ? pos : -1;  // last visible key (inclusive)
    lo[r] = p.window > 0 ? pos - p.window : -1;  // keys must be > lo
    slope[r] = (p.alibi != nullptr && gr < qr) ? p.alibi[hkv * p.n_rep + gr / p.lq] : 0.0f;
    if (gr < qr) {
      min_hi = min(min_hi, hi[r]);
      max_lo = max(max_lo, lo[r]);
    }
  }
  __syncthreads();

  const int grp = threadIdx.x / G, lane = threadIdx.x % G;
  const T* kbase;
  const T* vbase;
  size_t kstride, vstride;
  if (PAGED && !p.map_positions) {
    kbase = static_cast<const T*>(p.k) + static_cast<size_t>(hkv) * DK;
    vbase = static_cast<const T*>(p.v) + static_cast<size_t>(hkv) * DV;
    kstride = static_cast<size_t>(p.hkv) * DK;
    vstride = static_cast<size_t>(p.hkv) * DV;
  } else {  // a dense cache, read in order or through a map of its positions
    const size_t row = (static_cast<size_t>(b) * p.hkv + hkv) * p.cap;
    kbase = static_cast<const T*>(p.k) + row * DK;
    vbase = static_cast<const T*>(p.v) + row * DV;
    kstride = DK;
    vstride = DV;
  }
  const int32_t* map = PAGED ? p.map + static_cast<size_t>(b) * p.map_stride : nullptr;

  float m[RB], l[RB], acc[RB][NV * 8];
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < NV * 8; ++e) acc[r][e] = 0.0f;
  }

  // Each thread copies its own 16-byte slots and reads back only those, so the pipeline
  // needs no barrier: cp.async.wait_group orders a thread's copies before its reads.
  const int n_iter = (t1 - t0 + KPP * U - 1) / (KPP * U);
  auto slot = [&](int st, int u, int j) { return pipe + ((st * U + u) * (NK + NV) + j) * kThreads + threadIdx.x; };
  int mrow[U];  // paged: pool rows of the next stage to issue, loaded one stage early
  auto fetch_map = [&](int it) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + it * KPP * U + u * KPP + grp;
      mrow[u] = (PAGED && t < t1) ? __ldg(map + t) : t;
    }
  };
  auto issue = [&](int it) {
    const int st = it % S;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + it * KPP * U + u * KPP + grp;
      const bool ok = it < n_iter && t < t1;
      const size_t row = ok ? static_cast<size_t>(mrow[u]) : 0;
      const T* kp = kbase + row * kstride + lane * 8;
      const T* vp = vbase + row * vstride + lane * 8;
#pragma unroll
      for (int j = 0; j < NK; ++j) cp_async16(slot(st, u, j), kp + j * G * 8, ok ? 16 : 0);
#pragma unroll
      for (int j = 0; j < NV; ++j) cp_async16(slot(st, u, NK + j), vp + j * G * 8, ok ? 16 : 0);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int it = 0; it < S - 1; ++it) {
    fetch_map(it);
    issue(it);
  }
  fetch_map(S - 1);

  for (int it = 0; it < n_iter; ++it) {
    cp_async_wait<S - 2>();  // stage `it` has landed
    const int st = it % S;
    uint4 kr[U][NK], vr[U][NV];
    int tt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      tt[u] = t0 + it * KPP * U + u * KPP + grp;
#pragma unroll
      for (int j = 0; j < NK; ++j) kr[u][j] = *slot(st, u, j);
#pragma unroll
      for (int j = 0; j < NV; ++j) vr[u][j] = *slot(st, u, NK + j);
    }
    issue(it + S - 1);  // into the slots of iteration it - 1, read already
    fetch_map(it + S);
    float s[U][RB];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[NK * 8];
#pragma unroll
      for (int j = 0; j < NK; ++j) to_float8<T>(kr[u][j], kf + j * 8);
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < NK; ++j) {
          const float4* qp = reinterpret_cast<const float4*>(q_s + r * DK + (j * G + lane) * 8);
          const float4 a = qp[0], c = qp[1];
          part += a.x * kf[j * 8 + 0] + a.y * kf[j * 8 + 1] + a.z * kf[j * 8 + 2] + a.w * kf[j * 8 + 3] +
                  c.x * kf[j * 8 + 4] + c.y * kf[j * 8 + 5] + c.z * kf[j * 8 + 6] + c.w * kf[j * 8 + 7];
        }
#pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
        s[u][r] = part;
      }
    }
    // Masks only where a key of this pass is past t1 or hidden from some row (uniform).
    const int first = t0 + it * KPP * U, last = first + KPP * U - 1;
    if (extras || last >= t1 || last > min_hi || first <= max_lo) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int t = tt[u];
        const float add = (p.mask != nullptr && t < t1) ? __ldg(p.mask + static_cast<size_t>(b) * p.mask_stride + t) : 0.0f;
#pragma unroll
        for (int r = 0; r < RB; ++r) {
          float x = s[u][r];
          if (extras) {
            if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
            x = (x + slope[r] * static_cast<float>(t - hi[r]) + add) * kLog2e;
          }
          s[u][r] = (t < t1 && t <= hi[r] && t > lo[r]) ? x : -INFINITY;
        }
      }
    }
    // Online softmax, rescaling once per pass; values converted one key at a time.
    float mn[RB];
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      float mx = s[0][r];
#pragma unroll
      for (int u = 1; u < U; ++u) mx = fmaxf(mx, s[u][r]);
      mn[r] = fmaxf(m[r], mx);
      if (mn[r] != -INFINITY) {  // else nothing visible yet: keep (-inf, 0, 0)
        const float c = exp2f(m[r] - mn[r]);
        l[r] *= c;
#pragma unroll
        for (int e = 0; e < NV * 8; ++e) acc[r][e] *= c;
        m[r] = mn[r];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[NV * 8];
#pragma unroll
      for (int j = 0; j < NV; ++j) to_float8<T>(vr[u][j], vf + j * 8);
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        const float pu = mn[r] == -INFINITY ? 0.0f : exp2f(s[u][r] - mn[r]);
        l[r] += pu;
#pragma unroll
        for (int e = 0; e < NV * 8; ++e) acc[r][e] += pu * vf[e];
      }
    }
  }

  cp_async_wait<0>();
  __syncthreads();  // the merge reuses the pipeline's shared memory
  // Merge the block's KPP groups. Every lane of a group holds the same (m, l).
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    if (lane == 0) {
      red_ml[(grp * RB + r) * 2] = m[r];
      red_ml[(grp * RB + r) * 2 + 1] = l[r];
    }
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      float4* dst = reinterpret_cast<float4*>(red_acc + (grp * RB + r) * DV + (j * G + lane) * 8);
      dst[0] = make_float4(acc[r][j * 8 + 0], acc[r][j * 8 + 1], acc[r][j * 8 + 2], acc[r][j * 8 + 3]);
      dst[1] = make_float4(acc[r][j * 8 + 4], acc[r][j * 8 + 5], acc[r][j * 8 + 6], acc[r][j * 8 + 7]);
    }
  }
  __syncthreads();
  merge_and_store<DV>(p, blk, red_ml, red_acc, KPP, RB);
}

// Whether decode_mma.cuh has an instantiation for (dk, dv).
template <int DK, int DV>
constexpr bool has_mma() { return DK == DV && (DK == 64 || DK == 128); }

// Raises the kernel's dynamic shared memory limit once (it may pass 48 KB).
template <typename T, int DK, int DV, int RB, bool PAGED>
cudaError_t prepare_split() {
  static const cudaError_t e = cudaFuncSetAttribute(decode_split_kernel<T, DK, DV, RB, PAGED>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    smem_bytes<DK, DV>(RB));
  return e;
}

template <typename T, int DK, int DV, int RB, bool PAGED>
cudaError_t launch_split(const DecodeParams& p, cudaStream_t st) {
  if (const cudaError_t e = prepare_split<T, DK, DV, RB, PAGED>(); e != cudaSuccess) return e;
  const dim3 grid(p.splits * p.row_blocks, p.hkv, p.batch);
  return launch_programmatic(decode_split_kernel<T, DK, DV, RB, PAGED>, grid, dim3(kThreads), smem_bytes<DK, DV>(RB), st,
                             p.programmatic != 0, p);
}

template <typename T, int DK, int DV, int RB, bool PAGED>
int blocks_per_sm() {
  if (prepare_split<T, DK, DV, RB, PAGED>() != cudaSuccess) return 0;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_split_kernel<T, DK, DV, RB, PAGED>, kThreads,
                                                    smem_bytes<DK, DV>(RB)) != cudaSuccess)
    return 0;
  return n;
}

// Resident blocks per multiprocessor of the split kernel launch_decode would run for p
// (bf16 and f16 share their resources; the row count and layout pick the instantiation).
template <int DK, int DV>
int occupancy(int rows, bool paged, bool tensor_cores) {
  if (tensor_cores) {
    if constexpr (has_mma<DK, DV>()) return mma_blocks_per_sm<DK>(paged);
    return 0;
  }
  constexpr bool k8 = Tile<DK, DV>::kMaxRows >= 8;
  using T = __nv_bfloat16;
  switch (rows) {
    case 1: return paged ? blocks_per_sm<T, DK, DV, 1, true>() : blocks_per_sm<T, DK, DV, 1, false>();
    case 2: return paged ? blocks_per_sm<T, DK, DV, 2, true>() : blocks_per_sm<T, DK, DV, 2, false>();
    case 4: return paged ? blocks_per_sm<T, DK, DV, 4, true>() : blocks_per_sm<T, DK, DV, 4, false>();
    case 8:
      if constexpr (k8) return paged ? blocks_per_sm<T, DK, DV, 8, true>() : blocks_per_sm<T, DK, DV, 8, false>();
      return 0;
    default: return 0;
  }
}

template <typename T, int DK, int DV, bool PAGED>
cudaError_t launch_rows(const DecodeParams& p, cudaStream_t st) {
  constexpr int kMax = Tile<DK, DV>::kMaxRows;
  switch (p.rows) {
    case 1: return launch_split<T, DK, DV, 1, PAGED>(p, st);
    case 2: return launch_split<T, DK, DV, 2, PAGED>(p, st);
    case 4: return launch_split<T, DK, DV, 4, PAGED>(p, st);
    case 8:
      if constexpr (kMax >= 8) return launch_split<T, DK, DV, 8, PAGED>(p, st);
      return cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

// The whole decode for one head-dim pair: dtype and layout dispatch, one split kernel.
template <int DK, int DV>
int launch_decode(const DecodeParams& p, void* stream) {
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const bool paged = p.map != nullptr;
  cudaError_t e;
  if (p.tensor_cores) {
    if constexpr (has_mma<DK, DV>()) {
      e = p.kv_f16 ? (paged ? launch_mma<__half, DK, true>(p, st) : launch_mma<__half, DK, false>(p, st))
                   : (paged ? launch_mma<__nv_bfloat16, DK, true>(p, st) : launch_mma<__nv_bfloat16, DK, false>(p, st));
    } else {
      e = cudaErrorInvalidValue;
    }
  } else if (p.kv_f16) {
    e = paged ? launch_rows<__half, DK, DV, true>(p, st) : launch_rows<__half, DK, DV, false>(p, st);
  } else {
    e = paged ? launch_rows<__nv_bfloat16, DK, DV, true>(p, st)
              : launch_rows<__nv_bfloat16, DK, DV, false>(p, st);
  }
  return static_cast<int>(e);
}

}  // namespace kvf::exec::cuda::detail
