// Linear groups of a small batched decode (up to 64 rows of x; the step uses it for
// plan::kGemmRowsMin..kGemmRowsMax) on the tensor cores, still bound by
// the weight bytes as a decode is: every weight is read once, straight from global memory into
// the registers mma.sync takes it in, while x (already rounded to the weights' 16-bit type,
// the group's norm applied) is staged through shared memory and shared by the block's warps.
//   - A warp owns NT tiles of 8 weight rows (with a glu: NT/2 gate tiles and the matching up
//     tiles); a block, W warps side by side.
//   - The k axis is walked 32 elements at a time. Each lane loads one 16-byte vector per tile:
//     weight row g = lane / 4, elements 8 t .. 8 t + 7 (t = lane % 4), and its x rows g and
//     g + 8 at the same 8 elements. mma.sync wants element pairs {2t, 2t+1} and {2t+8, 2t+9}
//     of a 16-element slice; the same permutation of k on both operands leaves every dot
//     product unchanged, so elements 8t..8t+3 play that role in one mma and 8t+4..8t+7 in the
//     next: whole 16-byte loads, no shuffles.
//   - Too few column tiles to fill the device are split over k (`splits` blocks a tile); each
//     writes its partial sums, and the tile's last block to finish adds them in split order
//     (deterministic) and runs the epilogue: bias, then the glu, the residual add or a store.
//   - Launched as a programmatic dependent: the first weights are requested before the block
//     waits for the kernel in front (which writes x).
// Template knobs: MT 16-row tiles of x, NT tiles a warp, W warps a block, D stages in flight
// (bench/cuda/gemv_bench.cu sweeps them; gemm_rows.cu picks the launch).
#pragma once

#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step::gemm_rows_detail {

namespace ptx = kvf::exec::cuda::detail::ptx;

inline constexpr int kSlice = 32;           // k elements of one step of the loop (two mma)
inline constexpr int kStage = 4 * kSlice;   // k elements of x staged at a time
inline constexpr int kStride = kStage + 32; // halves between staged rows: rows g and g + 1 land
                                            // 64 bytes apart mod 128, so a quarter-warp's
                                            // 16-byte reads hit distinct banks

struct Args {
  const void* x16 = nullptr;  // [m, k], the weights' 16-bit type
  int64_t m = 0, k = 0;
  int64_t rows = 0;           // weight rows laid end to end over the parts (glu: the gate's)
  int splits = 1;
  float* partials = nullptr;  // splits > 1: partial_floats() of them
  unsigned* counters = nullptr;  // one per column tile, zero between launches
  LinearGroup g;
};

// Floats of partial sums a launch of `tiles` x `splits` blocks needs: every thread's
// accumulators (MT x NT fragments of 4).
inline int64_t partial_floats(int64_t tiles, int splits, int mt, int nt, int warps) {
  return tiles * splits * mt * nt * warps * 32 * 4;
}

// Weight row `r` of the group (laid end to end over the parts; glu_up: the up part's row r)
// as 16-byte vectors; a row past the end reads row 0 (valid memory) and is never stored.
__device__ inline const uint4* weight_row(const LinearGroup& g, int64_t r, int64_t rows, int64_t k, bool glu_up) {
  const gemv16_detail::Column c = gemv16_detail::column_of(g, r < rows ? r : 0);
  return static_cast<const uint4*>(g.part[glu_up ? 1 : c.part].w) + c.local * (k / 8);
}

template <int MT, int NT, int W, int D, bool F16, bool GLU>
__global__ void __launch_bounds__(W * 32) gemm_rows_kernel(Args a) {
  static_assert(!GLU || NT % 2 == 0, "a glu warp pairs gate and up tiles");
  constexpr int kRowsPerWarp = GLU ? 4 * NT : 8 * NT;  // output columns (glu) or weight rows
  constexpr int kXRows = 16 * MT;
  constexpr int kThreads = W * 32;
  extern __shared__ __align__(16) uint16_t xs[];  // [D][kXRows][kStride]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, t = lane % 4;
  const int64_t tile = blockIdx.x, split = blockIdx.y;
  const int64_t row0 = (tile * W + warp) * kRowsPerWarp;

  // The warp's weight rows: tile i is rows row0 + 8 i + (0..7); with a glu, tiles NT/2.. are
  // the up rows of the same columns.
  const uint4* wrow[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int64_t r = row0 + 8 * (GLU ? i % (NT / 2) : i) + gq;
    wrow[i] = weight_row(a.g, r, a.rows, a.k, GLU && i >= NT / 2);
  }

  // This split's slices of k.
  const int64_t slices = a.k / kSlice;
  const int64_t s_begin = slices * split / a.splits, s_end = slices * (split + 1) / a.splits;
  const int64_t stages = (s_end - s_begin + 3) / 4;

  auto load_w = [&](int64_t stage, uint4 (&w)[NT][4]) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t s = s_begin + 4 * stage + u;
#pragma unroll
      for (int i = 0; i < NT; ++i) w[i][u] = s < s_end ? __ldg(wrow[i] + s * 4 + t) : make_uint4(0, 0, 0, 0);
    }
  };
  const uint32_t xs_base = static_cast<uint32_t>(__cvta_generic_to_shared(xs));
  auto stage_x = [&](int64_t stage, int buf) {
    const auto* x = static_cast<const uint16_t*>(a.x16);
    for (int v = threadIdx.x; v < kXRows * (kStage / 8); v += kThreads) {
      const int r = v / (kStage / 8), c = v % (kStage / 8);
      const int64_t e = (s_begin + 4 * stage) * kSlice + 8 * c;
      const bool in = r < a.m && e < s_end * kSlice;
      const uint32_t dst = xs_base + static_cast<uint32_t>(((buf * kXRows + r) * kStride + 8 * c) * 2);
      ptx::cp_async16(dst, in ? x + r * a.k + e : x, in ? 16 : 0);
    }
    ptx::commit();
  };

  // A ring of D stages: while stage st is multiplied, stages st + 1 .. st + D - 1 are on
  // their way (weights into registers, x into shared memory).
  uint4 w[D][NT][4];
#pragma unroll
  for (int d = 0; d + 1 < D; ++d) load_w(d, w[d]);  // the weights never depend on the kernel in front
  await_kernel_in_front();
#pragma unroll
  for (int d = 0; d + 1 < D; ++d) stage_x(d, d);

  float acc[MT][NT][4] = {};
  for (int64_t st0 = 0; st0 < stages; st0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int64_t st = st0 + d;
      if (st >= stages) break;
      // Into the slot the previous stage freed (past stages' loads read nothing).
      load_w(st + D - 1, w[(d + D - 1) % D]);
      stage_x(st + D - 1, (d + D - 1) % D);
      ptx::wait<D - 1>();
      __syncthreads();
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (s_begin + 4 * st + u >= s_end) break;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint16_t* r0 = xs + (d * kXRows + 16 * mt + gq) * kStride + kSlice * u + 8 * t;
          const uint4 lo = *reinterpret_cast<const uint4*>(r0);
          const uint4 hi = *reinterpret_cast<const uint4*>(r0 + 8 * kStride);
          const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
          for (int i = 0; i < NT; ++i) {
            ptx::mma<F16>(acc[mt][i], a0, w[d][i][u].x, w[d][i][u].y);
            ptx::mma<F16>(acc[mt][i], a1, w[d][i][u].z, w[d][i][u].w);
          }
        }
      }
      __syncthreads();  // the slot just read is the next one staged into
    }
  }

  if (a.splits > 1) {
    // Partials as float4 [tile][split][MT * NT][thread]: coalesced, and each thread of the
    // reducing block reads back the positions it wrote.
    auto* p = reinterpret_cast<float4*>(a.partials);
    const int64_t base = (tile * a.splits + split) * (MT * NT) * kThreads + threadIdx.x;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        const float (&c)[4] = acc[mt][i];
        __stcg(p + base + (mt * NT + i) * kThreads, make_float4(c[0], c[1], c[2], c[3]));
      }
    }
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
      last = ptx::atom_inc_acq_rel(a.counters + tile, static_cast<unsigned>(a.splits - 1)) ==
             static_cast<unsigned>(a.splits - 1);
    }
    __syncthreads();
    if (!last) return;
    // Split by split, every fragment's loads issued together: one round trip to L2 a split
    // (a split at a time per fragment serializes splits x fragments of them).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int i = 0; i < NT; ++i) acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.0f;
    }
    for (int s = 0; s < a.splits; ++s) {
      const float4* q = p + (tile * a.splits + s) * (MT * NT) * kThreads + threadIdx.x;
      float4 v[MT][NT];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < NT; ++i) v[mt][i] = __ldcg(q + (mt * NT + i) * kThreads);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          acc[mt][i][0] += v[mt][i].x, acc[mt][i][1] += v[mt][i].y, acc[mt][i][2] += v[mt][i].z, acc[mt][i][3] += v[mt][i].w;
        }
      }
    }
  }

  // acc[mt][i][e]: x row 16 mt + gq (+8 for e >= 2), weight row 8 i + 2 t + e % 2 of tile i.
  // Every bias and residual is loaded before the first store (gemv16_detail::column_adds).
  constexpr int kStored = GLU ? NT / 2 : NT;
  gemv16_detail::Column col[kStored][4];
  gemv16_detail::ColumnAdds adds[kStored][4][MT];
#pragma unroll
  for (int i = 0; i < kStored; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t r = row0 + 8 * i + 2 * t + e % 2;
      col[i][e] = r >= a.rows ? gemv16_detail::Column{-1, 0}
                  : GLU       ? gemv16_detail::Column{0, r}
                              : gemv16_detail::column_of(a.g, r);
      if (col[i][e].part < 0) continue;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int64_t xr = 16 * mt + gq + (e >= 2 ? 8 : 0);
        if (xr < a.m) adds[i][e][mt] = gemv16_detail::column_adds<GLU>(a.g, a.g.part[col[i][e].part], col[i][e].local, static_cast<int>(xr));
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kStored; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const gemv16_detail::Column c = col[i][e];
      if (c.part < 0) continue;  // a row past the end
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int64_t xr = 16 * mt + gq + (e >= 2 ? 8 : 0);
        if (xr < a.m) {
          gemv16_detail::store_column<GLU>(a.g, a.g.part[c.part], c.local, static_cast<int>(xr), acc[mt][i][e],
                                           GLU ? acc[mt][i + NT / 2][e] : 0.0f, adds[i][e][mt]);
        }
      }
    }
  }
}

// Rows of the weights a block covers: output columns (glu) or weight rows.
template <int NT, int W, bool GLU>
constexpr int block_rows() {
  return W * (GLU ? 4 * NT : 8 * NT);
}

template <int MT, int D>
constexpr int smem_bytes() {
  return D * 16 * MT * kStride * 2;
}

// One launch over a.rows rows in tiles of block_rows(), a.splits blocks a tile.
template <int MT, int NT, int W, int D, bool F16, bool GLU>
void launch(const Args& a, cudaStream_t s, bool pdl) {
  constexpr int smem = smem_bytes<MT, D>();
  auto* kernel = gemm_rows_kernel<MT, NT, W, D, F16, GLU>;
  if constexpr (smem > 48 * 1024) {
    static const bool opted_in = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) == cudaSuccess;
    (void)opted_in;
  }
  const int64_t tiles = (a.rows + block_rows<NT, W, GLU>() - 1) / block_rows<NT, W, GLU>();
  launch_programmatic(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(a.splits)), dim3(W * 32), smem, s, pdl, a);
}

}  // namespace kvf::exec::cuda::step::gemm_rows_detail
