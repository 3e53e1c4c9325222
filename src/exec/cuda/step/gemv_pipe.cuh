// Decode products over 16-bit weights for 1 or 2 rows of x, as one continuous stream of weight
// bytes per warp. The register kernel (gemv16.cuh) gives each warp one burst of loads and then
// a reduction, and its blocks come in waves: between bursts, and in a wave's tail, nothing is
// in flight. Here the grid is sized to what the device holds at once, each warp walks its
// columns (tasks w, w + warps, ...) chunk by chunk, and the loads of the next chunk are issued
// before the current one is used (two register sets, ping-pong), so a warp always has a chunk
// of weights on the way, through its column's reduction and into its next column.
//   - x (times the norm's weight) is put in shared memory once per block, so a chunk reads x
//     there, not from L1 with the norm's weight beside it; 1/rms scales the sums at the end.
//   - Launched as a programmatic dependent: a warp's first chunk is issued before the kernel
//     in front has finished.
#pragma once

#include "exec/cuda/step/gemv16.cuh"

namespace kvf::exec::cuda::step::gemv_pipe_detail {

using gemv16_detail::block_inv_rms;
using gemv16_detail::Column;
using gemv16_detail::column_of;
using gemv16_detail::store_column;
using gemv16_detail::widen;

// The shared memory x takes: MR rows of k floats.
inline int64_t x_bytes(int mr, int64_t k) { return static_cast<int64_t>(mr) * k * 4; }
constexpr int64_t kMaxXBytes = 48 * 1024;  // what a launch may take unasked

// MR rows of x (x_rows of them there); C columns a task (with a glu, each column's gate and up
// rows); G 16-byte groups per row and lane in a chunk; W warps a block.
template <int MR, DType dt, int C, int G, int W, bool GLU>
__global__ void __launch_bounds__(W * 32)
    gemv_pipe_kernel(const float* x, int x_rows, int64_t k, int64_t cols, LinearGroup g) {
  constexpr int R = GLU ? 2 * C : C;
  extern __shared__ __align__(16) float xs[];  // [MR][k]
  __shared__ float inv[MR];
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * W;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * W + threadIdx.x / 32;
  const int64_t row_elems = k / 8, tasks = (cols + C - 1) / C;
  const int64_t per_task = (row_elems + 32 * G - 1) / (32 * G);  // chunks per task
  const int64_t chunks = first < tasks ? (tasks - first + warps - 1) / warps * per_task : 0;

  // Chunk c of this warp: the task's columns, and groups base + lane + 32u of each row.
  auto task_of = [&](int64_t c) { return first + c / per_task * warps; };
  auto fetch = [&](int64_t c, uint4 (&dst)[R][G]) {
    const int64_t t = task_of(c), base = c % per_task * 32 * G;
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const int64_t col = t * C + j < cols ? t * C + j : 0;  // past the end: column 0's row, never stored
      const Column at = column_of(g, col);
      const uint4* gate = static_cast<const uint4*>(g.part[at.part].w) + at.local * row_elems;
      const uint4* up = GLU ? static_cast<const uint4*>(g.part[1].w) + at.local * row_elems : nullptr;
#pragma unroll
      for (int u = 0; u < G; ++u) {
        const int64_t i = base + lane + 32 * u;
        dst[j][u] = i < row_elems ? gate[i] : make_uint4(0, 0, 0, 0);
        if constexpr (GLU) dst[C + j][u] = i < row_elems ? up[i] : make_uint4(0, 0, 0, 0);
      }
    }
  };
  float acc[R][MR] = {};
  auto use = [&](int64_t c, const uint4 (&src)[R][G]) {
    const int64_t base = c % per_task * 32 * G;
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int64_t i = base + lane + 32 * u;
      if (i >= row_elems) break;
      float xv[MR][8];
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float4 a = reinterpret_cast<const float4*>(xs + m * k)[2 * i];
        const float4 b = reinterpret_cast<const float4*>(xs + m * k)[2 * i + 1];
        xv[m][0] = a.x, xv[m][1] = a.y, xv[m][2] = a.z, xv[m][3] = a.w;
        xv[m][4] = b.x, xv[m][5] = b.y, xv[m][6] = b.z, xv[m][7] = b.w;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float w[8];
        widen<dt>(src[r][u], w);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] += w[e] * xv[m][e];
        }
      }
    }
    if (c % per_task != per_task - 1) return;
    const int64_t t = task_of(c);
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const int64_t col = t * C + j;
      const Column at = column_of(g, col < cols ? col : 0);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float scale = g.norm_w != nullptr ? inv[m] : 1.0f;
        const float y = warp_sum(acc[j][m]) * scale;
        const float up = GLU ? warp_sum(acc[GLU ? C + j : j][m]) * scale : 0.0f;
        if (lane == 0 && col < cols && m < x_rows) store_column<GLU>(g, g.part[at.part], at.local, m, y, up);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int m = 0; m < MR; ++m) acc[r][m] = 0.0f;
    }
  };

  uint4 a[R][G], b[R][G];
  if (chunks > 0) fetch(0, a);
  // What the kernel in front writes (x, the residual, the outputs' old readers) is touched
  // only after it has finished.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  if (g.norm_w != nullptr) block_inv_rms<MR, W>(x, k, g.norm_eps, inv, x_rows);
  for (int64_t idx = threadIdx.x; idx < MR * k; idx += W * 32) {
    const int64_t m = idx / k, e = idx % k;
    const float s = g.norm_w == nullptr ? 1.0f : g.norm_unit_offset ? 1.0f + g.norm_w[e] : g.norm_w[e];
    xs[idx] = m < x_rows ? x[idx] * s : 0.0f;
  }
  __syncthreads();
  for (int64_t c = 0; c < chunks; c += 2) {
    if (c + 1 < chunks) fetch(c + 1, b);
    use(c, a);
    if (c + 1 >= chunks) break;
    if (c + 2 < chunks) fetch(c + 2, a);
    use(c + 1, b);
  }
}

// Blocks of the kernel an SM holds at once, from the occupancy calculator (once per shape).
template <int MR, DType dt, int C, int G, int W, bool GLU>
int resident_blocks(int64_t smem) {
  static int per_sm = -1, sms = 0, at_smem = -1;
  if (per_sm < 0 || at_smem != smem) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_pipe_kernel<MR, dt, C, G, W, GLU>, W * 32,
                                                  static_cast<size_t>(smem));
    at_smem = static_cast<int>(smem);
  }
  return per_sm * sms;
}

// One launch over x_rows (<= MR) rows of x; blocks_per_sm caps the grid (0: as many as fit).
template <int MR, DType dt, int C, int G, int W, bool GLU>
void launch(const float* x, int x_rows, int64_t k, const LinearGroup& g, cudaStream_t s, bool pdl, int blocks_per_sm = 0) {
  const int64_t cols = gemv16_detail::group_columns(g);
  const int64_t smem = x_bytes(MR, k);
  int64_t grid = resident_blocks<MR, dt, C, G, W, GLU>(smem);
  if (blocks_per_sm > 0) {
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    grid = std::min<int64_t>(grid, static_cast<int64_t>(blocks_per_sm) * sms);
  }
  const int64_t needed = ((cols + C - 1) / C + W - 1) / W;
  grid = std::max<int64_t>(1, std::min(grid, needed));
  launch_kernel(gemv_pipe_kernel<MR, dt, C, G, W, GLU>, dim3(static_cast<unsigned>(grid)), dim3(W * 32),
                static_cast<size_t>(smem), s, pdl, x, x_rows, k, cols, g);
}

}  // namespace kvf::exec::cuda::step::gemv_pipe_detail
