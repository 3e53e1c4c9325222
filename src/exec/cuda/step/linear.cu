// Matrix products with f32 accumulation, weights read in their stored type and widened in
// registers (quantized weights are never dequantized in memory). A linear group runs on the
// kernel plan::linear_kernel picks among those that take it (kernels_for):
//   - up to 8 rows (decode): the one-row, register and bulk-copy kernels (gemv16.cu,
//     gemv_quantized.cu), or one warp per output column here, streaming each weight row once
//     for all rows of x: bound by the weight bytes, as decode is; with the tensor cores
//     allowed, gemm_rows.cu for a small batched decode's 16-bit weights;
//   - 9 to 64 rows on Hopper: gemm_stream_sm90a.cu for the groups plan::gemm_stream_chosen
//     picks;
//   - more rows: cuBLASLt where the tensor cores are allowed (tensor_cores.cu), else 64x64
//     f32 output tiles through shared memory, weights widened as they land.
#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/gemv_bulk_shapes.cuh"
#include "exec/cuda/step/launch.cuh"
#include "exec/cuda/step/stored_groups.cuh"
#include "plan/gemm_rows_schedule.h"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kGemvWarps = 8;

// Each lane issues kUnroll weight loads before it uses any: enough bytes in flight per warp
// to cover the memory latency.
constexpr int kUnroll = 4;

// With an RMSNorm in front, the weights of 8 elements are scaled by the norm's weight
// (the row's 1 / rms is applied to the sum at the end: it is one number per row).
__device__ void scale8(const float* nw, bool unit_offset, int64_t k0, float (&w)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(nw + k0), b = *reinterpret_cast<const float4*>(nw + k0 + 4);
  const float s[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] *= unit_offset ? 1.0f + s[i] : s[i];
}

// The group's columns laid end to end; warp c takes global column c. With glu the columns
// are the gate's and each warp reads the gate row and the up row.
template <int MR, DType dt>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_group_kernel(const float* x, int64_t k, int64_t row_bytes,
                                                                     LinearGroup g) {
  __shared__ float inv[MR];
  if (g.norm_w != nullptr) gemv16_detail::block_inv_rms<MR, kGemvWarps>(x, k, g.norm_eps, inv);
  const int lane = threadIdx.x % 32;
  int64_t col = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  int p = 0;
  if (!g.glu) {
    while (p < g.parts && col >= g.part[p].n) col -= g.part[p++].n;
    if (p == g.parts) return;
  } else if (col >= g.part[0].n) {
    return;
  }
  const int rows_read = g.glu ? 2 : 1;
  float acc[2][MR] = {};
  const int64_t groups = k / 8;
  for (int q = 0; q < rows_read; ++q) {
    const uint8_t* row = static_cast<const uint8_t*>(g.part[p + q].w) + col * row_bytes;
    int64_t i = lane;
    for (; i + 32 * (kUnroll - 1) < groups; i += 32 * kUnroll) {
      float wv[kUnroll][8];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) load8<dt>(row, i + 32 * u, wv[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (g.norm_w != nullptr) scale8(g.norm_w, g.norm_unit_offset, (i + 32 * u) * 8, wv[u]);
        fma8<MR>(acc[q], wv[u], x, k, (i + 32 * u) * 8);
      }
    }
    for (; i < groups; i += 32) {
      float wv[8];
      load8<dt>(row, i, wv);
      if (g.norm_w != nullptr) scale8(g.norm_w, g.norm_unit_offset, i * 8, wv);
      fma8<MR>(acc[q], wv, x, k, i * 8);
    }
  }
  if (g.norm_w != nullptr) {
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      acc[0][r] *= inv[r];
      acc[1][r] *= inv[r];
    }
  }
  const int64_t n = g.part[p].n;
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    float y = warp_sum(acc[0][r]);
    if (g.part[p].bias != nullptr) y += g.part[p].bias[col];
    if (g.glu) {
      float u = warp_sum(acc[1][r]);
      if (g.part[1].bias != nullptr) u += g.part[1].bias[col];
      if (lane == 0) store_glu(g, r * n + col, glu_value(g.act, y) * u);
    } else if (g.residual_out != nullptr) {
      if (lane == 0) g.residual_out[r * n + col] = y + g.residual[r * n + col];
    } else if (lane == 0) {
      g.part[p].out[r * n + col] = y;
    }
  }
}

constexpr int kTile = 64, kTileK = 32;

// 256 threads, each a 4x4 block of the 64x64 output tile.
__global__ void __launch_bounds__(256) gemm_kernel(const float* x, int64_t m, int64_t k, DType dt, const uint8_t* w,
                                                   int64_t row_bytes, int64_t n, const float* bias, float* out) {
  __shared__ float xs[kTileK][kTile + 4];
  __shared__ float ws[kTileK][kTile + 4];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile, n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += 256) {
      const int r = i / kTileK, c = i % kTileK;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + c;
      xs[c][r] = gm < m && gk < k ? x[gm * k + gk] : 0.0f;
      ws[c][r] = gn < n && gk < k ? load_stored(dt, w + gn * row_bytes, gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kTileK; ++c) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[c][ty * 4 + i];
        b[i] = ws[c][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty * 4 + i;
    if (gm >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = n0 + tx * 4 + j;
      if (gn < n) out[gm * n + gn] = acc[i][j] + (bias != nullptr ? bias[gn] : 0.0f);
    }
  }
}

// One product of [m, k] x [k, n] per batch entry; the batch walk maps entries to matrices.
__global__ void matmul_kernel(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n, Walk batch) {
  const int64_t total = batch.numel * m * n;
  for (const int64_t i : grid_stride(total)) {
    const int64_t bi = i / (m * n), r = (i / n) % m, c = i % n;
    const float* ar = a + walk_offset(batch, 0, bi) * m * k + r * k;
    const float* bm = b + walk_offset(batch, 1, bi) * k * n + c;
    float acc = 0;
    for (int64_t t = 0; t < k; ++t) acc += ar[t] * bm[t * n];
    out[i] = acc;
  }
}

template <int MR>
void launch_gemv_group(const float* x, int64_t k, DType dt, int64_t rb, const LinearGroup& g, cudaStream_t s) {
  int64_t cols = g.glu ? g.part[0].n : 0;
  for (int p = 0; p < g.parts && !g.glu; ++p) cols += g.part[p].n;
  const auto grid = static_cast<unsigned>((cols + kGemvWarps - 1) / kGemvWarps);
  switch (dt) {
    case DType::kF32: gemv_group_kernel<MR, DType::kF32><<<grid, kGemvWarps * 32, 0, s>>>(x, k, rb, g); return;
    case DType::kF16: gemv_group_kernel<MR, DType::kF16><<<grid, kGemvWarps * 32, 0, s>>>(x, k, rb, g); return;
    case DType::kBF16: gemv_group_kernel<MR, DType::kBF16><<<grid, kGemvWarps * 32, 0, s>>>(x, k, rb, g); return;
    case DType::kQ8_0: gemv_group_kernel<MR, DType::kQ8_0><<<grid, kGemvWarps * 32, 0, s>>>(x, k, rb, g); return;
    default: gemv_group_kernel<MR, DType::kQ4_0><<<grid, kGemvWarps * 32, 0, s>>>(x, k, rb, g); return;
  }
}

// Whether m rows of x run on gemv_group_kernel: 16-byte loads of whole groups of 8.
bool warps_fits(int64_t m, int64_t k, DType dt) {
  const bool quant = dt == DType::kQ8_0 || dt == DType::kQ4_0;
  return m >= 1 && m <= plan::kGemvMaxRows && k % 8 == 0 && (quant ? k % 32 == 0 : stored_row_bytes(dt, k) % 16 == 0);
}

void gemm(const float* x, int64_t m, int64_t k, DType dt, const void* w, int64_t n, const float* bias, float* out,
          const Launch& l) {
  if (linear_tensor_cores(x, m, k, dt, w, n, bias, out, l)) return;
  cudaStream_t s = stream_of(l);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile), static_cast<unsigned>((m + kTile - 1) / kTile));
  gemm_kernel<<<grid, 256, 0, s>>>(x, m, k, dt, static_cast<const uint8_t*>(w), stored_row_bytes(dt, k), n, bias, out);
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, DType w_dt, const void* w, int64_t n, const float* bias, float* out,
            const Launch& l) {
  if (m == 0 || n == 0) return;
  LinearGroup one;
  one.part[0] = LinearPart{w, bias, n, out};
  if (!warps_fits(m, k, w_dt) && !gemm_rows_fits(m, k, w_dt, one)) return gemm(x, m, k, w_dt, w, n, bias, out, l);
  linear_group(x, m, k, w_dt, one, l);
}

namespace {

// The part of g whose output is `src`, or -1.
int part_of(const LinearGroup& g, const void* src) {
  for (int p = 0; p < g.parts; ++p) {
    if (g.part[p].out == src) return p;
  }
  return -1;
}

// Whether task t reads one part's output whole, element by element (a rope: pairs adjacent),
// and writes f32 or rounds into a half cache.
bool task_in_epilogue(const LinearGroup& g, const PackTask& t) {
  const bool roped = t.kind == PackKind::kRope || t.kind == PackKind::kRopeIntoSlice || t.kind == PackKind::kRopeIntoScatter;
  const bool slice = t.kind == PackKind::kSlice || t.kind == PackKind::kRopeIntoSlice;
  const bool pool = t.kind == PackKind::kScatter || t.kind == PackKind::kRopeIntoScatter;
  const void* src = roped ? static_cast<const void*>(t.rope.x) : slice ? t.slice.upd : t.scatter.upd;
  const int p = part_of(g, src);
  if (p < 0) return false;
  const int64_t n = g.part[p].n;
  if (roped && (!t.rope.interleaved || t.rope.d % 2 != 0 || t.rope.rotary % 2 != 0 || t.rope.rows * t.rope.d != n)) {
    return false;
  }
  if (slice && (t.slice.outer * t.slice.n * t.slice.inner != n || !(t.slice.rounded || t.slice.to == DType::kF32))) return false;
  if (pool && (t.scatter.m * t.scatter.row != n || !(t.scatter.rounded || t.scatter.to == DType::kF32))) return false;
  return true;
}

}  // namespace

bool pack_in_epilogue(const LinearGroup& g) {
  if (g.then.tasks == 0 || g.glu || g.residual_out != nullptr) return false;
  for (int p = 0; p < g.parts; ++p) {
    if (g.part[p].n % 2 != 0) return false;
  }
  for (int t = 0; t < g.then.tasks; ++t) {
    if (!task_in_epilogue(g, g.then.task[t])) return false;
  }
  return true;
}

namespace {

// The kernels that take g over m rows of x here: each kernel's shapes, and the tensor cores'
// where the step allows them (a handle: the compute type is not f32).
plan::LinearKernels kernels_for(int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  using K = plan::LinearKernel;
  plan::LinearKernels can{K::kTiles};
  if (m == 1 && gemv_bulk_detail::one_row_group_fits(k, w_dt, g)) can.add(K::kGemvOneRow);
  if (gemv16_detail::register_fits(m, k, w_dt, g)) can.add(K::kGemvRegister);
  if (gemv_bulk_detail::bulk_fits(m, k, w_dt, g)) can.add(K::kGemvBulk);
  if (warps_fits(m, k, w_dt)) can.add(K::kGemvWarps);
  if (l.tc.handle != nullptr) {
    if (gemm_rows_fits(m, k, w_dt, g)) can.add(K::kGemmRows);
    if (gemm_stream_fits(m, k, w_dt, g)) can.add(K::kGemmStream);
    if (tensor_core_fits(m, k, w_dt)) can.add(K::kCublasLt);
  }
  return can;
}

void warps_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, cudaStream_t s) {
  const int64_t rb = stored_row_bytes(w_dt, k);
  switch (m) {
    case 1: launch_gemv_group<1>(x, k, w_dt, rb, g, s); return;
    case 2: launch_gemv_group<2>(x, k, w_dt, rb, g, s); return;
    case 3: launch_gemv_group<3>(x, k, w_dt, rb, g, s); return;
    case 4: launch_gemv_group<4>(x, k, w_dt, rb, g, s); return;
    case 5: launch_gemv_group<5>(x, k, w_dt, rb, g, s); return;
    case 6: launch_gemv_group<6>(x, k, w_dt, rb, g, s); return;
    case 7: launch_gemv_group<7>(x, k, w_dt, rb, g, s); return;
    default: launch_gemv_group<8>(x, k, w_dt, rb, g, s); return;
  }
}

// The group as separate launches: the norm, a product a part (cuBLASLt or f32 tiles), then
// the glu or the residual add.
void tiles_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (g.norm_w != nullptr) {
    rmsnorm(x, g.norm_w, g.norm_out, m, k, g.norm_eps, g.norm_unit_offset, l);
    x = g.norm_out;
  }
  for (int p = 0; p < g.parts; ++p) gemm(x, m, k, w_dt, g.part[p].w, g.part[p].n, g.part[p].bias, g.part[p].out, l);
  const int64_t n = m * g.part[0].n;
  if (g.glu) {
    glu(g.act, g.part[0].out, g.part[1].out, g.glu_out, n, l, g.glu_out16, g.glu_out16_bf16);
  } else if (g.residual_out != nullptr) {
    Walk flat;
    flat.shape[0] = flat.numel = n;
    flat.stride[0][0] = flat.stride[1][0] = 1;
    binary(BinaryOp::kAdd, DType::kF32, g.part[0].out, g.residual, g.residual_out, flat, l);
  }
}

// Launches g on `kernel`; false, launching nothing, where the kernel refuses it at run time
// (its scratch short, no cuBLASLt algorithm for the shape).
bool run_on(plan::LinearKernel kernel, const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g,
            const Launch& l) {
  using K = plan::LinearKernel;
  switch (kernel) {
    case K::kGemvOneRow: return gemv16_one_row(x, k, w_dt, g, l) || gemv_quantized_one_row(x, k, w_dt, g, l);
    case K::kGemvRegister: return gemv16_register(x, m, k, w_dt, g, l);
    case K::kGemvBulk: return gemv16_bulk(x, m, k, w_dt, g, l) || gemv_quantized_bulk(x, m, k, w_dt, g, l);
    case K::kGemvWarps: warps_group(x, m, k, w_dt, g, stream_of(l)); return true;
    case K::kGemmRows: return linear_group_rows(x, m, k, w_dt, g, l);
    case K::kGemmStream: return linear_group_stream(x, m, k, w_dt, g, l);
    case K::kCublasLt: return linear_group_tensor_cores(x, m, k, w_dt, g, l);
    case K::kTiles: tiles_group(x, m, k, w_dt, g, l); return true;
  }
  return false;
}

}  // namespace

bool hands_rounded_x(int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  const plan::LinearGroupShape shape{.m = m, .parts = g.parts, .norm = g.norm_w != nullptr};
  return plan::takes_rounded_x(plan::linear_kernel(shape, kernels_for(m, k, w_dt, g, l)));
}

void linear_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (m == 0) return;
  const plan::LinearGroupShape shape{.m = m, .parts = g.parts, .norm = g.norm_w != nullptr};
  plan::LinearKernels can = kernels_for(m, k, w_dt, g, l);
  if (g.then.tasks > 0) {  // in the one-row kernel's epilogue, else a pack launch after the group
    LinearGroup fused = g;
    fused.fault = l.fault;
    if (plan::linear_kernel(shape, can) == plan::LinearKernel::kGemvOneRow && pack_in_epilogue(fused) &&
        run_on(plan::LinearKernel::kGemvOneRow, x, m, k, w_dt, fused, l)) {
      return;
    }
  }
  LinearGroup plain = g;
  plain.then = Pack{};
  for (;;) {  // the tiles run anything, so this ends
    const plan::LinearKernel kernel = plan::linear_kernel(shape, can);
    if (run_on(kernel, x, m, k, w_dt, plain, l)) break;
    can.remove(kernel);
  }
  if (g.then.tasks > 0) run_pack(g.then, l);
}

void matmul(const float* a, const float* b, float* out, int64_t m, int64_t k, int64_t n, const Walk& batch,
            const Launch& l) {
  matmul_kernel<<<blocks_for(batch.numel * m * n), kThreads, 0, stream_of(l)>>>(a, b, out, m, k, n, batch);
}

}  // namespace kvf::exec::cuda::step
