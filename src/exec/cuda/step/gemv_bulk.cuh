// Decode products for 1 to 8 rows of x, with the weight rows brought into shared memory by
// bulk copies (the TMA's 1-D form) instead of through registers: 16-bit weights, and q8_0/q4_0
// ones whose rows are whole 16-byte vectors (k a multiple of 256), widened from shared memory
// 8 elements at a time as the register kernels widen them. A register
// kernel (gemv16.cuh) keeps at most what its registers hold in flight, and on the H200 that
// stops near 2.5 TB/s; a bulk copy holds no register, so every resident block has its whole
// share of the weights on the way at once (R rows, up to 48 KB a block, several blocks an SM).
//   - Block: R weight rows (R columns, or with a glu R/2 columns' gate and up rows). Thread 0
//     issues one copy per row, then every thread waits for the kernel in front (PDL), computes
//     the fused RMSNorm's 1/rms and waits for the copies.
//   - The block's threads split k: each reads its x groups once (norm-scaled) and applies them
//     to all R rows from shared memory, so x is read once per R rows; the partial sums meet
//     in shared memory and the epilogue (bias, glu, residual) is the register kernel's.
#pragma once

#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/gemv_bulk_shapes.cuh"
#include "exec/cuda/step/pack_ops.cuh"
#include "exec/cuda/step/stored_groups.cuh"
#include "exec/cuda/tma_ptx.cuh"

namespace kvf::exec::cuda::step::gemv_bulk_detail {

using gemv16_detail::block_inv_rms;
using gemv16_detail::Column;
using gemv16_detail::column_of;
using gemv16_detail::load_x;
using gemv16_detail::column_adds;
using gemv16_detail::ColumnAdds;
using gemv16_detail::store_column;
namespace tma = detail::tma;

constexpr int kWarps = 4;

__device__ inline uint32_t shared_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Thread 0's share of a block's start: the barrier at `bar` set up for the bytes of the n
// weight rows of columns col0.. (with a glu, their up rows too, C rows further), and one bulk
// copy a row into the shared memory at dst.
template <bool GLU>
__device__ void copy_rows(const LinearGroup& g, int64_t col0, int n, int C, int64_t row_bytes, uint32_t dst, uint32_t bar) {
  tma::mbar_init(bar, 1);
  tma::mbar_fence_init();
  tma::mbar_arrive_expect_tx(bar, static_cast<uint32_t>((GLU ? 2 : 1) * n * row_bytes));
  for (int c = 0; c < n; ++c) {
    const Column at = column_of(g, col0 + c);
    const auto* w = static_cast<const uint8_t*>(g.part[at.part].w) + at.local * row_bytes;
    tma::load_bulk(dst + static_cast<uint32_t>(c * row_bytes), w, static_cast<uint32_t>(row_bytes), bar);
    if constexpr (GLU) {
      const auto* up = static_cast<const uint8_t*>(g.part[1].w) + at.local * row_bytes;
      tma::load_bulk(dst + static_cast<uint32_t>((C + c) * row_bytes), up, static_cast<uint32_t>(row_bytes), bar);
    }
  }
}

// MR: the most rows of x (1, 2, 4 or 8); x_rows of them are there. W warps a block.
template <int MR, DType dt, int R, bool GLU, int W = kWarps>
__global__ void __launch_bounds__(W * 32)
    gemv_bulk_kernel(const float* x, int x_rows, int64_t k, int64_t cols, LinearGroup g) {
  constexpr int C = GLU ? R / 2 : R;  // output columns of the block
  extern __shared__ __align__(128) uint8_t rows[];  // [R][k] weights as stored
  __shared__ __align__(8) uint64_t bar;
  __shared__ float inv[MR];
  __shared__ float part[W][R][MR];
  const int64_t row_bytes = stored_row_bytes(dt, k), col0 = static_cast<int64_t>(blockIdx.x) * C;
  const int n = static_cast<int>(cols - col0 < C ? cols - col0 : C);
  const uint32_t b = shared_address(&bar);
  if (threadIdx.x == 0) copy_rows<GLU>(g, col0, n, C, row_bytes, shared_address(rows), b);
  // The weights never depend on the kernel in front; x, the residual and the outputs' old
  // readers do, and are touched only after it has finished.
  await_kernel_in_front();
  if (g.norm_w != nullptr) gemv16_detail::norm_inv<MR, W>(x, k, g, inv, x_rows);
  __syncthreads();  // the barrier's init is visible to every waiter
  tma::mbar_wait(b, 0);

  float acc[R][MR] = {};
  for (int64_t i = threadIdx.x; i < k / 8; i += W * 32) {
    float xv[MR][8];
    load_x<MR>(x, k, i, g, xv, x_rows);
#pragma unroll
    for (int r = 0; r < R; ++r) {  // rows past n hold stale bytes: summed, never stored
      float w[8];
      load8<dt>(rows + r * row_bytes, i, w);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][m] += w[e] * xv[m][e];
      }
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane == 0) part[warp][r][m] = v;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < n * MR; idx += W * 32) {
    const int c = idx / MR, m = idx % MR;
    if (m >= x_rows) continue;
    const float scale = g.norm_w != nullptr ? inv[m] : 1.0f;
    float y = 0.0f, up = 0.0f;
    for (int w = 0; w < W; ++w) {
      y += part[w][c][m];
      if constexpr (GLU) up += part[w][C + c][m];
    }
    const Column at = column_of(g, col0 + c);
    store_column<GLU>(g, g.part[at.part], at.local, m, y * scale, up * scale);
  }
}

// The one-row kernel's epilogue for g.then (pack_in_epilogue admitted it: no glu or residual,
// parts of even width, so a block's columns hold whole rope pairs): each column's value
// (bias added) meets its pair's in shared memory, then goes through the tasks that read it.
template <int C>
__device__ void then_columns(const LinearGroup& g, const Column& mine, int n, float value) {
  __shared__ float done[C];
  if (threadIdx.x < n) done[threadIdx.x] = value;
  __syncthreads();
  if (threadIdx.x >= n) return;
  pack_detail::then_element(g.then, g.part[mine.part].out, mine.local, value, done[threadIdx.x ^ 1], g.fault);
}

// One row of x, its groups in registers: every load whose address does not wait for the
// kernel in front (the weights, the norm's weight, the biases) is issued before waiting for
// it, and after it every load of x and the residual at once; 1/rms comes from the x in
// registers. What a block does once the kernel in front has finished is then one round trip
// to memory, one reduction a row and the products, instead of a pass over x for 1/rms and
// then one round trip a group of x for the products. Each thread takes at most U groups
// (x[tid + 32 W u]).
template <DType dt, int R, bool GLU, int W, int U>
__global__ void __launch_bounds__(W * 32)
    gemv_bulk_row_kernel(const float* x, int64_t k, int64_t cols, LinearGroup g) {
  constexpr int C = GLU ? R / 2 : R;
  extern __shared__ __align__(128) uint8_t rows[];  // [R][k] weights as stored
  __shared__ __align__(8) uint64_t bar;
  __shared__ float part[W][R];
  const int64_t row_bytes = stored_row_bytes(dt, k), col0 = static_cast<int64_t>(blockIdx.x) * C, groups = k / 8;
  const int n = static_cast<int>(cols - col0 < C ? cols - col0 : C);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t b = shared_address(&bar);
  if (threadIdx.x == 0) copy_rows<GLU>(g, col0, n, C, row_bytes, shared_address(rows), b);
  const bool norm = g.norm_w != nullptr;
  float s[U][8];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = threadIdx.x + W * 32 * u;
    gemv16_detail::norm_scale8(g, i < groups ? i : 0, s[u]);
  }
  const Column mine = column_of(g, col0 + (threadIdx.x < n ? threadIdx.x : 0));  // the column this thread stores
  // The next kernel's blocks may take their places (and issue their own weights' copies)
  // while this one still waits, unless it is the attention after a decode step's ropes and
  // cache writes (g.then): its blocks launch once these have stored, not beside them while
  // they stream weights.
  if (g.then.tasks == 0) let_next_kernel_launch();
  wait_for_kernel_in_front();
  float xv[U][8];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = threadIdx.x + W * 32 * u;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 a = i < groups ? reinterpret_cast<const float4*>(x)[2 * i] : zero;
    const float4 c = i < groups ? reinterpret_cast<const float4*>(x)[2 * i + 1] : zero;
    const float v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) xv[u][e] = v[e];
  }
  ColumnAdds adds;
  if (threadIdx.x < n) adds = column_adds<GLU>(g, g.part[mine.part], mine.local, 0);
  float inv = 1.0f;
  if (norm && g.norm_inv != nullptr) {
    inv = g.norm_inv[0];
  } else if (norm) {
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += xv[u][e] * xv[u][e];
    ss = warp_sum(ss);
    if (lane == 0) part[warp][0] = ss;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < W; ++w) t += part[w][0];
    inv = inv_rms(t, k, g.norm_eps);
  }
  __syncthreads();  // every thread has read part[]; the barrier's init is visible to every waiter
  tma::mbar_wait(b, 0);

  float acc[R] = {};
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = threadIdx.x + W * 32 * u;
    if (i >= groups) break;
#pragma unroll
    for (int r = 0; r < R; ++r) {  // rows past n hold stale bytes: summed, never stored
      float w[8];
      load8<dt>(rows + r * row_bytes, i, w);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r] += w[e] * (xv[u][e] * s[u][e]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  float y = 0.0f, up = 0.0f;
  if (threadIdx.x < n) {
    for (int w = 0; w < W; ++w) {
      y += part[w][threadIdx.x];
      if constexpr (GLU) up += part[w][C + threadIdx.x];
    }
    store_column<GLU>(g, g.part[mine.part], mine.local, 0, y * inv, up * inv, adds);
  }
  if constexpr (!GLU) {
    if (g.then.tasks > 0) {
      then_columns<C>(g, mine, n, y * inv + adds.bias);
      let_next_kernel_launch();
    }
  }
}

template <int MR, DType dt, int R, bool GLU, int W = kWarps>
void launch(const float* x, int x_rows, int64_t k, const LinearGroup& g, cudaStream_t s, bool pdl) {
  const int64_t cols = gemv16_detail::group_columns(g);
  constexpr int C = GLU ? R / 2 : R;
  const auto grid = static_cast<unsigned>((cols + C - 1) / C);
  launch_programmatic(gemv_bulk_kernel<MR, dt, R, GLU, W>, dim3(grid), dim3(W * 32), static_cast<size_t>(R * stored_row_bytes(dt, k)), s, pdl,
                x, x_rows, k, cols, g);
}

// One row of x on gemv_bulk_row_kernel at R weight rows, W warps and U groups a thread (k up
// to 256 W U). Above 48 KB of weights a block the launch asks for the shared memory first.
template <DType dt, int R, int W, int U>
void launch_row(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
  const int64_t cols = gemv16_detail::group_columns(g);
  const int C = g.glu ? R / 2 : R;
  const auto grid = static_cast<unsigned>((cols + C - 1) / C);
  const auto smem = static_cast<size_t>(R * stored_row_bytes(dt, k));
  auto go = [&](auto kernel) {
    if (smem > kMaxBlockBytes) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    launch_programmatic(kernel, dim3(grid), dim3(W * 32), smem, s, true, x, k, cols, g);
  };
  if (g.glu) go(gemv_bulk_row_kernel<dt, R, true, W, U>);
  else go(gemv_bulk_row_kernel<dt, R, false, W, U>);
}

// One row of x on gemv_bulk_row_kernel at the shape measured best on a TinyLlama layer (4
// weight rows and 4 warps a block: docs/benchmarks.md), 8 warps past 8192 elements a row;
// false, launching nothing, where it does not fit (one_row_fits).
template <DType dt>
bool launch_one_row(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
  if (!one_row_fits(dt, k)) return false;
  const int64_t groups = k / 8;
  if (groups <= 128) launch_row<dt, 4, 4, 1>(x, k, g, s);
  else if (groups <= 256) launch_row<dt, 4, 4, 2>(x, k, g, s);
  else if (groups <= 512) launch_row<dt, 4, 4, 4>(x, k, g, s);
  else if (groups <= 1024) launch_row<dt, 4, 4, 8>(x, k, g, s);
  else launch_row<dt, 4, 8, 8>(x, k, g, s);
  return true;
}

// Launches x_rows (<= MR) rows of x with rows_per_block() weight rows a block; false when
// the rows are not bulk-copyable or none fits.
template <int MR, DType dt>
bool launch_any_rows(const float* x, int x_rows, int64_t k, const LinearGroup& g, cudaStream_t s, bool pdl) {
  if (!bulk_rows(dt, k)) return false;
  switch (rows_per_block(stored_row_bytes(dt, k), g.glu)) {
    case 8: g.glu ? launch<MR, dt, 8, true>(x, x_rows, k, g, s, pdl) : launch<MR, dt, 8, false>(x, x_rows, k, g, s, pdl); return true;
    case 4: g.glu ? launch<MR, dt, 4, true>(x, x_rows, k, g, s, pdl) : launch<MR, dt, 4, false>(x, x_rows, k, g, s, pdl); return true;
    case 2: g.glu ? launch<MR, dt, 2, true>(x, x_rows, k, g, s, pdl) : launch<MR, dt, 2, false>(x, x_rows, k, g, s, pdl); return true;
    case 1: if (!g.glu) launch<MR, dt, 1, false>(x, x_rows, k, g, s, pdl); return !g.glu;
    default: return false;
  }
}

// m (1 to 8) rows of x on the kernel for the least of 1, 2, 4 or 8 rows that holds them,
// told how many there are, as a programmatic dependent.
template <DType dt>
bool launch_rows(const float* x, int64_t m, int64_t k, const LinearGroup& g, cudaStream_t s) {
  const int rows = static_cast<int>(m);
  if (m <= 1) return launch_any_rows<1, dt>(x, rows, k, g, s, true);
  if (m <= 2) return launch_any_rows<2, dt>(x, rows, k, g, s, true);
  if (m <= 4) return launch_any_rows<4, dt>(x, rows, k, g, s, true);
  return launch_any_rows<8, dt>(x, rows, k, g, s, true);
}

}  // namespace kvf::exec::cuda::step::gemv_bulk_detail
