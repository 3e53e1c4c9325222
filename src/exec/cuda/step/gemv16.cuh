// Decode products over 16-bit weights (f16, bf16) for m <= 8 rows of x. They are bound by the
// weight bytes, so the kernel is shaped to keep enough of those bytes in flight and to read x
// as seldom as it can:
//   - a warp owns C consecutive output columns (with a glu, each column's gate and up rows):
//     every x element a lane loads serves all of them, so x's L1 traffic stays below the
//     weights' (one column per warp would read 2 bytes of x per weight byte at m = 1, 16 at
//     m = 8);
//   - a lane issues the 16-byte loads of G groups of every row it owns before it uses any,
//     C * G * 512 bytes in flight per warp (rows * G when glu doubles them);
//   - a fused RMSNorm scales x (not the weights) as x is loaded, and applies each row's 1/rms
//     to the sums at the end; the block computes 1/rms while its first weights are on their
//     way;
//   - launched as a programmatic dependent (PDL), a block issues its first weight loads
//     before it waits for the kernel in front to finish: the weights never depend on it, so
//     their first round trip overlaps that kernel's tail and the launch.
// The shape knobs (columns per warp, groups in flight, warps per block) are template
// parameters so that bench/cuda/gemv_bench.cu can sweep them; gemv16.cu picks the launch.
#pragma once

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step::gemv16_detail {

// Whether g over m rows of x runs on the register kernel (gemv16_kernel as gemv16.cu
// launches it: 1 or 2 rows, 16-bit weights in whole groups of 8, a glu over gate and up).
inline bool register_fits(int64_t m, int64_t k, DType dt, const LinearGroup& g) {
  const bool sixteen = dt == DType::kF16 || dt == DType::kBF16;
  return sixteen && m >= 1 && m <= plan::kGemvRegisterMaxRows && k % 8 == 0 && g.parts >= 1 && (!g.glu || g.parts == 2);
}

template <DType dt>
__device__ void widen(const uint4& u, float (&w)[8]) {
  if constexpr (dt == DType::kF16) {
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      w[2 * i] = f.x;
      w[2 * i + 1] = f.y;
    }
  } else {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      w[2 * i] = f.x;
      w[2 * i + 1] = f.y;
    }
  }
}

// 1 / rms of each of the first `rows` (<= MR) rows of x, computed by the whole block (W
// warps) into inv[]; the rows past them get 1/sqrt(eps) and are never used.
// Rows of whole, aligned float4s are read at least kRmsVecs float4s a thread at a time (over
// the rows, then along them), every load issued before the first is used: one element a
// thread at a time waits out a memory latency per element (8 of them in a row of 2048 at 256
// threads), ahead of the block's first product.
inline constexpr int kRmsVecs = 4;

template <int MR, int W>
__device__ void block_inv_rms(const float* x, int64_t k, double eps, float* inv, int rows = MR) {
  __shared__ float part[W][MR];
  float ss[MR] = {};
  if (k % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const auto* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = k / 4;
    constexpr int V = MR >= kRmsVecs ? 1 : kRmsVecs / MR;  // float4s of a row a pass
    for (int64_t c0 = threadIdx.x; c0 < n4; c0 += V * static_cast<int64_t>(blockDim.x)) {
      float4 v[MR][V];
#pragma unroll
      for (int r = 0; r < MR; ++r)
#pragma unroll
        for (int u = 0; u < V; ++u) {
          const int64_t c = c0 + u * static_cast<int64_t>(blockDim.x);
          v[r][u] = r < rows && c < n4 ? x4[r * n4 + c] : make_float4(0, 0, 0, 0);
        }
#pragma unroll
      for (int r = 0; r < MR; ++r)
#pragma unroll
        for (int u = 0; u < V; ++u) ss[r] += v[r][u].x * v[r][u].x + v[r][u].y * v[r][u].y + v[r][u].z * v[r][u].z + v[r][u].w * v[r][u].w;
    }
  } else {
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
#pragma unroll
      for (int r = 0; r < MR; ++r) ss[r] += r < rows ? x[r * k + c] * x[r * k + c] : 0.0f;
    }
  }
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    const float v = warp_sum(ss[r]);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32][r] = v;
  }
  __syncthreads();
  if (threadIdx.x < MR) {
    float t = 0;
    for (int w = 0; w < W; ++w) t += part[w][threadIdx.x];
    inv[threadIdx.x] = inv_rms(t, k, eps);
  }
  __syncthreads();
}

// The rows' 1 / rms into inv[]: read where the group has them computed ahead, else
// computed by the block.
template <int MR, int W>
__device__ void norm_inv(const float* x, int64_t k, const LinearGroup& g, float* inv, int rows = MR) {
  if (g.norm_inv == nullptr) return block_inv_rms<MR, W>(x, k, g.norm_eps, inv, rows);
  if (threadIdx.x < MR) inv[threadIdx.x] = static_cast<int>(threadIdx.x) < rows ? g.norm_inv[threadIdx.x] : 0.0f;
  __syncthreads();
}

// The fused norm's weight over x's group i (1 + it with a unit offset); ones without a norm.
__device__ inline void norm_scale8(const LinearGroup& g, int64_t i, float (&s)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) s[e] = 1.0f;
  if (g.norm_w == nullptr) return;
  const float4 a = reinterpret_cast<const float4*>(g.norm_w)[2 * i], b = reinterpret_cast<const float4*>(g.norm_w)[2 * i + 1];
  const float n[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) s[e] = g.norm_unit_offset ? 1.0f + n[e] : n[e];
}

// x's 8 elements of group i for each of its first `rows` rows (times the norm's weight when
// one is fused); zeros for the rows past them.
template <int MR>
__device__ void load_x(const float* x, int64_t k, int64_t i, const LinearGroup& g, float (&xv)[MR][8], int rows = MR) {
  float s[8];
  norm_scale8(g, i, s);
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 a = r < rows ? reinterpret_cast<const float4*>(x + r * k)[2 * i] : zero;
    const float4 b = r < rows ? reinterpret_cast<const float4*>(x + r * k)[2 * i + 1] : zero;
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) xv[r][e] = v[e] * s[e];
  }
}

// Output column `col` of the group: its part and its weight row (row_bytes apart).
struct Column {
  int part = 0;
  int64_t local = 0;
};

__device__ inline Column column_of(const LinearGroup& g, int64_t col) {
  Column c;
  c.local = col;
  while (c.part + 1 < g.parts && c.local >= g.part[c.part].n) c.local -= g.part[c.part++].n;
  return c;
}

// MR rows of x; C columns per warp; G 16-byte groups per row per lane in flight; W warps.
// What the store of column j (of part p) of x's row m adds to the product besides the glu:
// the bias (with a glu, the up part's too) and the residual. Loaded apart from the store, so
// that a thread storing many columns loads them all before its first store: a store may
// alias a later load (the residual is updated in place), and a load behind one waits for it.
struct ColumnAdds {
  float bias = 0.0f, bias_up = 0.0f, residual = 0.0f;
};

template <bool GLU>
__device__ inline ColumnAdds column_adds(const LinearGroup& g, const LinearPart& p, int64_t j, int m) {
  ColumnAdds a;
  if (p.bias != nullptr) a.bias = p.bias[j];
  if constexpr (GLU) {
    if (g.part[1].bias != nullptr) a.bias_up = g.part[1].bias[j];
  } else if (g.residual_out != nullptr) {
    a.residual = g.residual[m * p.n + j];
  }
  return a;
}

// Column j (of part p) of x's row m: y = the product (1/rms, not the bias, applied), up =
// the up row's product with a glu; the bias, then the glu, the residual add or the plain store.
template <bool GLU>
__device__ inline void store_column(const LinearGroup& g, const LinearPart& p, int64_t j, int m, float y, float up,
                                    const ColumnAdds& a) {
  if (p.bias != nullptr) y += a.bias;
  if constexpr (GLU) {
    if (g.part[1].bias != nullptr) up += a.bias_up;
    store_glu(g, m * p.n + j, glu_value(g.act, y) * up);
  } else if (g.residual_out != nullptr) {
    g.residual_out[m * p.n + j] = y + a.residual;
  } else {
    p.out[m * p.n + j] = y;
  }
}

template <bool GLU>
__device__ inline void store_column(const LinearGroup& g, const LinearPart& p, int64_t j, int m, float y, float up) {
  store_column<GLU>(g, p, j, m, y, up, column_adds<GLU>(g, p, j, m));
}

template <int MR, DType dt, int C, int G, int W, bool GLU>
__global__ void __launch_bounds__(W * 32) gemv16_kernel(const float* x, int64_t k, int64_t cols, LinearGroup g) {
  constexpr int R = GLU ? 2 * C : C;  // weight rows the warp streams: columns, then (glu) their up rows
  __shared__ float inv[MR];
  const int lane = threadIdx.x % 32;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * W + threadIdx.x / 32) * C;
  const int64_t row_elems = k / 8;  // 16-byte groups per row
  const uint4* rows[R];
  Column at[C];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    // A column past the end reads column 0's row (valid memory) and stores nothing.
    at[c] = column_of(g, col0 + c < cols ? col0 + c : 0);
    rows[c] = static_cast<const uint4*>(g.part[at[c].part].w) + at[c].local * row_elems;
    if constexpr (GLU) rows[C + c] = static_cast<const uint4*>(g.part[1].w) + at[c].local * row_elems;
  }
  float acc[R][MR] = {};
  for (int64_t base = 0; base < row_elems; base += 32 * G) {
    uint4 raw[R][G];
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int64_t i = base + lane + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) raw[r][u] = i < row_elems ? rows[r][i] : make_uint4(0, 0, 0, 0);
    }
    if (base == 0) {  // every thread gets here
      // What the kernel in front writes (x, the residual, the outputs' old readers) is
      // touched only after it has finished; without PDL this returns at once.
      await_kernel_in_front();
      if (g.norm_w != nullptr) norm_inv<MR, W>(x, k, g, inv);
    }
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int64_t i = base + lane + 32 * u;
      if (i >= row_elems) break;
      float xv[MR][8];
      load_x<MR>(x, k, i, g, xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float w[8];
        widen<dt>(raw[r][u], w);
#pragma unroll
        for (int m = 0; m < MR; ++m) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] += w[e] * xv[m][e];
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t col = col0 + c;
    const LinearPart& p = g.part[at[c].part];
    const int64_t j = at[c].local;
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      const float scale = g.norm_w != nullptr ? inv[m] : 1.0f;
      const float y = warp_sum(acc[c][m]) * scale;
      const float up = GLU ? warp_sum(acc[GLU ? C + c : c][m]) * scale : 0.0f;  // every lane shuffles
      if (lane == 0 && col < cols) store_column<GLU>(g, p, j, m, y, up);
    }
  }
}

// Columns of the group: the parts' laid end to end, or (glu) the gate's.
inline int64_t group_columns(const LinearGroup& g) {
  int64_t cols = g.glu ? g.part[0].n : 0;
  for (int p = 0; p < g.parts && !g.glu; ++p) cols += g.part[p].n;
  return cols;
}

// One launch; pdl: as a programmatic dependent of the kernel in front on the stream.
template <int MR, DType dt, int C, int G, int W, bool GLU>
void launch(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s, bool pdl) {
  const int64_t cols = group_columns(g);
  const auto grid = static_cast<unsigned>((cols + W * C - 1) / (W * C));
  launch_programmatic(gemv16_kernel<MR, dt, C, G, W, GLU>, dim3(grid), dim3(W * 32), 0, s, pdl, x, k, cols, g);
}

}  // namespace kvf::exec::cuda::step::gemv16_detail
