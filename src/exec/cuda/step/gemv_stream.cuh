// Decode products over 16-bit weights for 1 or 2 rows of x, as a few long streams: each
// block owns a contiguous range of output columns and walks it in chunks of R weight rows,
// with S chunks of bulk copies in flight in a ring of shared-memory stages (one mbarrier a
// stage). The one-shot kernels (gemv16.cuh, gemv_bulk.cuh) give each block a few rows and
// stop near 2.6 TB/s whatever their bytes in flight; the decode attention kernel, whose
// blocks each stream one long contiguous range, reaches 4.35 TB/s. bench_cuda_gemv measures
// whether the weights behave the same way.
//   - x (times 1/rms and the norm's weight when a norm is fused) is staged once per block in
//     shared memory; each chunk's rows are then applied to it by the whole block, k split
//     over the threads, and reduced in shared memory.
//   - Thread 0 refills a stage as soon as the block is done with it: S - 1 chunks stay in
//     flight while one is consumed.
#pragma once

#include "exec/cuda/step/gemv_bulk.cuh"

namespace kvf::exec::cuda::step::gemv_stream_detail {

using gemv16_detail::block_inv_rms;
using gemv16_detail::Column;
using gemv16_detail::column_of;
using gemv16_detail::store_column;
using gemv16_detail::widen;
using gemv_bulk_detail::shared_address;
namespace tma = detail::tma;

constexpr int kWarps = 4;

__host__ __device__ constexpr int64_t align128(int64_t b) { return (b + 127) / 128 * 128; }

// Dynamic shared memory of one block: x's rows, then S stages of R weight rows.
template <int MR, int R, int S>
constexpr int64_t smem_bytes(int64_t k) {
  return align128(MR * k * 4) + S * R * k * 2;
}

template <int MR, DType dt, int R, int S, bool GLU>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_stream_kernel(const float* x, int64_t k, int64_t cols, int64_t per_block, LinearGroup g) {
  constexpr int C = GLU ? R / 2 : R;  // output columns a chunk
  extern __shared__ __align__(128) uint8_t smem[];
  float* xs = reinterpret_cast<float*>(smem);  // [MR][k]
  uint8_t* stages = smem + align128(MR * k * 4);
  __shared__ __align__(8) uint64_t full[S];
  __shared__ float inv[MR];
  __shared__ float part[kWarps][R][MR];
  const int64_t row_bytes = k * 2, stage_bytes = R * row_bytes;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.x) * per_block;
  const int64_t c_end = c_begin + per_block < cols ? c_begin + per_block : cols;
  const int64_t chunks = c_begin < c_end ? (c_end - c_begin + C - 1) / C : 0;
  auto issue = [&](int64_t j) {  // chunk j's rows into stage j % S
    const int64_t c0 = c_begin + j * C;
    const int n = static_cast<int>(c_end - c0 < C ? c_end - c0 : C);
    const uint32_t bar = shared_address(&full[j % S]), dst = shared_address(stages + (j % S) * stage_bytes);
    tma::mbar_arrive_expect_tx(bar, static_cast<uint32_t>((GLU ? 2 : 1) * n * row_bytes));
    for (int c = 0; c < n; ++c) {
      const Column at = column_of(g, c0 + c);
      const auto* w = static_cast<const uint8_t*>(g.part[at.part].w) + at.local * row_bytes;
      tma::load_bulk(dst + static_cast<uint32_t>(c * row_bytes), w, static_cast<uint32_t>(row_bytes), bar);
      if constexpr (GLU) {
        const auto* up = static_cast<const uint8_t*>(g.part[1].w) + at.local * row_bytes;
        tma::load_bulk(dst + static_cast<uint32_t>((C + c) * row_bytes), up, static_cast<uint32_t>(row_bytes), bar);
      }
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) tma::mbar_init(shared_address(&full[s]), 1);
    tma::mbar_fence_init();
    for (int64_t j = 0; j < chunks && j < S; ++j) issue(j);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  if (g.norm_w != nullptr) block_inv_rms<MR, kWarps>(x, k, g.norm_eps, inv);
  for (int64_t i = threadIdx.x; i < k; i += kWarps * 32) {
    const float w = g.norm_w == nullptr ? 1.0f : g.norm_unit_offset ? 1.0f + g.norm_w[i] : g.norm_w[i];
#pragma unroll
    for (int m = 0; m < MR; ++m) xs[m * k + i] = x[m * k + i] * w * (g.norm_w != nullptr ? inv[m] : 1.0f);
  }
  __syncthreads();  // xs, and the barriers' init, visible to every thread
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t j = 0; j < chunks; ++j) {
    const int s = static_cast<int>(j % S);
    tma::mbar_wait(shared_address(&full[s]), static_cast<int>((j / S) & 1));
    const uint8_t* rows = stages + s * stage_bytes;
    float acc[R][MR] = {};
    for (int64_t i = threadIdx.x; i < k / 8; i += kWarps * 32) {
      float xv[MR][8];
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float4 a = reinterpret_cast<const float4*>(xs + m * k)[2 * i], b = reinterpret_cast<const float4*>(xs + m * k)[2 * i + 1];
        xv[m][0] = a.x, xv[m][1] = a.y, xv[m][2] = a.z, xv[m][3] = a.w;
        xv[m][4] = b.x, xv[m][5] = b.y, xv[m][6] = b.z, xv[m][7] = b.w;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {  // rows past the chunk's end hold stale bytes: summed, never stored
        float w[8];
        widen<dt>(reinterpret_cast<const uint4*>(rows + r * row_bytes)[i], w);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] += w[e] * xv[m][e];
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float v = warp_sum(acc[r][m]);
        if (lane == 0) part[warp][r][m] = v;
      }
    }
    __syncthreads();  // the stage is read and the partial sums are in
    if (threadIdx.x == 0 && j + S < chunks) issue(j + S);
    const int64_t c0 = c_begin + j * C;
    const int n = static_cast<int>(c_end - c0 < C ? c_end - c0 : C);
    for (int idx = threadIdx.x; idx < n * MR; idx += kWarps * 32) {
      const int c = idx / MR, m = idx % MR;
      float y = 0.0f, up = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        y += part[w][c][m];
        if constexpr (GLU) up += part[w][C + c][m];
      }
      const Column at = column_of(g, c0 + c);
      store_column<GLU>(g, g.part[at.part], at.local, m, y, up);
    }
    __syncthreads();  // part is reused by the next chunk
  }
}

// Launches over `blocks` blocks (each a contiguous range of columns); the kernel's shared
// memory limit is raised on its first launch, which must not be inside a stream capture.
template <int MR, DType dt, int R, int S, bool GLU>
void launch(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s, int blocks, bool pdl) {
  constexpr int C = GLU ? R / 2 : R;
  const int64_t cols = gemv16_detail::group_columns(g);
  const int64_t chunks = (cols + C - 1) / C;
  const int64_t grid = chunks < blocks ? chunks : blocks;
  const int64_t per_block = (chunks + grid - 1) / grid * C;
  const auto bytes = static_cast<size_t>(smem_bytes<MR, R, S>(k));
  static size_t raised = 0;
  if (bytes > raised) {
    cudaFuncSetAttribute(gemv_stream_kernel<MR, dt, R, S, GLU>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(bytes));
    raised = bytes;
  }
  launch_kernel(gemv_stream_kernel<MR, dt, R, S, GLU>, dim3(static_cast<unsigned>((cols + per_block - 1) / per_block)),
                dim3(kWarps * 32), bytes, s, pdl, x, k, cols, per_block, g);
}

}  // namespace kvf::exec::cuda::step::gemv_stream_detail
