// Routed experts (kernels.h's moe) in the two forms plan/moe_schedule.h names. Every launch
// reads the routing weights on the device, so a step never waits for the host to learn which
// experts its rows picked, and an expert no row picked costs a block that reads one row of
// routing weights and leaves.
//   - direct (rows <= 8): a block per (column block, expert) runs the expert's products over
//     every row, warp per output column as in linear.cu's GEMV; a combine adds the picked
//     experts' terms row by row.
//   - gathered: a routing launch lists each expert's rows (in row order) and each row's place
//     in those lists; the gate/up and down products run as a grouped GEMM whose tiles past an
//     expert's row count leave at once (on the tensor cores from 16-bit x when the plan says
//     so, as the linears' tensor-core path rounds it; else f32 SIMT tiles); the combine reads
//     each row's terms through its places.
// Each term is rounded, then added in expert order, as the traced chain's Mul and Add are.
#include <mma.h>

#include <type_traits>

#include "exec/cuda/step/launch.cuh"
#include "exec/cuda/step/stored_groups.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kWarps = 8;  // direct kernels: warps per block, one output column each

// Whether any of the first `rows` rows picked expert e: the whole block's answer.
__device__ bool picked_by_any(const float* weights, int64_t rows, int64_t experts, int64_t e) {
  bool picked = false;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) picked = picked || weights[r * experts + e] != 0.0f;
  return __syncthreads_or(picked) != 0;
}

// Direct scratch: units [experts, rows, ffn], then outputs [experts, rows, dim].
__device__ __host__ inline float* direct_units(const MoeArgs& a) { return a.scratch; }
__device__ __host__ inline float* direct_outputs(const MoeArgs& a) { return a.scratch + a.experts * a.rows * a.ffn; }

// Warp per output column of expert e's product over every row. kUnit: the unit
// h[e][r][j] = act(x[r] . gate_e[j]) * (x[r] . up_e[j]); else y[e][r][c] = h[e][r] . down_e[c].
template <bool kUnit, int MR, DType dt>
__global__ void __launch_bounds__(kWarps * 32) expert_direct(MoeArgs a, int64_t row_bytes) {
  constexpr int kParts = kUnit ? 2 : 1;
  const int64_t e = blockIdx.y;
  if (!picked_by_any(a.weights, MR, a.experts, e)) return;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t k = kUnit ? a.dim : a.ffn, n = kUnit ? a.ffn : a.dim;
  if (col >= n) return;
  const int lane = threadIdx.x % 32;
  const uint8_t* w[2] = {static_cast<const uint8_t*>(kUnit ? a.gate[e] : a.down[e]) + col * row_bytes,
                         kUnit ? static_cast<const uint8_t*>(a.up[e]) + col * row_bytes : nullptr};
  const float* x = kUnit ? a.x : direct_units(a) + e * MR * a.ffn;
  float acc[kParts][MR] = {};
  for (int64_t i = lane; i < k / 8; i += 32) {
#pragma unroll
    for (int q = 0; q < kParts; ++q) {
      float wv[8];
      load8<dt>(w[q], i, wv);
      fma8<MR>(acc[q], wv, x, k, i * 8);
    }
  }
  float* out = kUnit ? direct_units(a) + e * MR * a.ffn : direct_outputs(a) + e * MR * a.dim;
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    const float y = warp_sum(acc[0][r]);
    const float u = kUnit ? warp_sum(acc[kParts - 1][r]) : 0.0f;
    if (lane == 0) out[r * n + col] = kUnit ? glu_value(a.act, y) * u : y;
  }
}

// out[r][c] = sum over the experts row r picked, in expert order, of round(y * weight).
__global__ void combine_direct(MoeArgs a) {
  const float* y = direct_outputs(a);
  for (const int64_t i : grid_stride(a.rows * a.dim)) {
    const int64_t r = i / a.dim, c = i % a.dim;
    float o = 0.0f;
    for (int64_t e = 0; e < a.experts; ++e) {
      const float w = a.weights[r * a.experts + e];
      if (w != 0.0f) o = __fadd_rn(o, __fmul_rn(y[(e * a.rows + r) * a.dim + c], w));
    }
    a.out[i] = o;
  }
}

// Gathered scratch of one pass over `per` experts: units [per, rows, ffn], outputs [per, rows,
// dim], each expert's row list [per, rows], each row's place in them [rows, per] (-1: not
// picked), the lists' lengths [per].
struct Pass {
  float* units;
  float* outputs;
  int32_t* lists;
  int32_t* places;
  int32_t* counts;
  int64_t first, per;  // the pass's experts: first .. first + per (some past the last expert)
};

Pass pass_of(const MoeArgs& a, int64_t first) {
  const int64_t per = a.experts_per_pass;
  Pass p;
  p.units = a.scratch;
  p.outputs = p.units + per * a.rows * a.ffn;
  p.lists = reinterpret_cast<int32_t*>(p.outputs + per * a.rows * a.dim);
  p.places = p.lists + per * a.rows;
  p.counts = p.places + a.rows * per;
  p.first = first;
  p.per = per;
  return p;
}

constexpr int kRouteThreads = 256;

// Block j lists the rows that picked expert first + j, in row order.
__global__ void __launch_bounds__(kRouteThreads) route(MoeArgs a, Pass p) {
  __shared__ int warp_count[kRouteThreads / 32];
  const int64_t j = blockIdx.x, e = p.first + j;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int base = 0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += kRouteThreads) {
    const int64_t r = r0 + threadIdx.x;
    const bool picked = e < a.experts && r < a.rows && a.weights[r * a.experts + e] != 0.0f;
    const unsigned ballot = __ballot_sync(0xffffffffu, picked);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int place = base + __popc(ballot & ((1u << lane) - 1u)), total = 0;
    for (int w = 0; w < kRouteThreads / 32; ++w) {
      place += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (r < a.rows) {
      p.places[r * p.per + j] = picked ? place : -1;
      if (picked) p.lists[j * a.rows + place] = static_cast<int32_t>(r);
    }
    base += total;
    __syncthreads();  // every warp has read warp_count before the next round writes it
  }
  if (threadIdx.x == 0) p.counts[j] = base;
}

constexpr int kTile = 64, kTileK = 32;

// What one tile of the grouped GEMM works on: expert e (the pass's j-th), its listed rows from
// m0 (count in all), output columns from n0 of n, the product's depth k and its weights, and
// where its outputs go. kUnit: x's listed rows by gate and up into the units; else the units
// by down into the outputs.
struct Tile {
  int64_t j, e, count, m0, n0, k, n, row_bytes;
  const uint8_t* w[2];
  const int32_t* list;
  const float* units;
  float* out;
};

// False for a tile past its expert's list (or past the last expert): it leaves at once.
template <bool kUnit>
__device__ bool tile_of(const MoeArgs& a, const Pass& p, Tile& t) {
  t.j = blockIdx.z;
  t.e = p.first + t.j;
  if (t.e >= a.experts) return false;
  t.count = p.counts[t.j];
  t.m0 = static_cast<int64_t>(blockIdx.y) * kTile;
  if (t.m0 >= t.count) return false;
  t.n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  t.k = kUnit ? a.dim : a.ffn;
  t.n = kUnit ? a.ffn : a.dim;
  t.row_bytes = stored_row_bytes(kUnit ? a.gate_dt : a.down_dt, t.k);
  t.w[0] = static_cast<const uint8_t*>(kUnit ? a.gate[t.e] : a.down[t.e]);
  t.w[1] = static_cast<const uint8_t*>(kUnit ? a.up[t.e] : nullptr);
  t.list = p.lists + t.j * a.rows;
  t.units = p.units + t.j * a.rows * a.ffn;
  t.out = kUnit ? p.units + t.j * a.rows * a.ffn : p.outputs + t.j * a.rows * a.dim;
  return true;
}

// One 64x64 tile of an expert's product over its listed rows, 256 threads of 4x4 outputs.
// kUnit: x's listed rows by the gate and up weights, act(gate) * up into the pass's units;
// else the units by the down weights into its outputs. Tiles past the list leave at once.
template <bool kUnit>
__global__ void __launch_bounds__(256) expert_tiles(MoeArgs a, Pass p) {
  __shared__ float xs[kTileK][kTile + 4];
  __shared__ float ws[kUnit ? 2 : 1][kTileK][kTile + 4];
  Tile t;
  if (!tile_of<kUnit>(a, p, t)) return;
  const int64_t count = t.count, m0 = t.m0, n0 = t.n0, k = t.k, n = t.n;
  const DType dt = kUnit ? a.gate_dt : a.down_dt;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += 256) {
      const int r = i / kTileK, c = i % kTileK;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + c;
      const bool x_in = gm < count && gk < k, w_in = gn < n && gk < k;
      xs[c][r] = !x_in ? 0.0f : kUnit ? a.x[t.list[gm] * k + gk] : t.units[gm * k + gk];
      ws[0][c][r] = w_in ? load_stored(dt, t.w[0] + gn * t.row_bytes, gk) : 0.0f;
      if constexpr (kUnit) ws[1][c][r] = w_in ? load_stored(dt, t.w[1] + gn * t.row_bytes, gk) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int c = 0; c < kTileK; ++c) {
      float xv[4], wv[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        xv[i] = xs[c][ty * 4 + i];
#pragma unroll
        for (int q = 0; q < (kUnit ? 2 : 1); ++q) wv[q][i] = ws[q][c][tx * 4 + i];
      }
#pragma unroll
      for (int q = 0; q < (kUnit ? 2 : 1); ++q) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) acc[q][i][jj] += xv[i] * wv[q][jj];
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty * 4 + i;
    if (gm >= count) continue;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int64_t gn = n0 + tx * 4 + jj;
      if (gn >= n) continue;
      t.out[gm * n + gn] = kUnit ? glu_value(a.act, acc[0][i][jj]) * acc[1][i][jj] : acc[0][i][jj];
    }
  }
}

template <class Half>
__device__ inline Half to_half(float v) {
  if constexpr (std::is_same_v<Half, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

// 8 values rounded to Half, as one 16-byte store.
template <class Half>
__device__ inline void store8(Half* dst, const float (&v)[8]) {
  alignas(16) Half h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = to_half<Half>(v[i]);
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
}

// expert_tiles on the tensor cores: the tile's x rows and weight rows rounded to Half in
// shared memory (quantized weights widened, each d * q rounded), read as 8-element groups
// (the plan asks for widths in whole 32-element blocks), 16x16x16 products with f32 sums,
// 4 warps of 32x32 outputs; the sums go through shared memory to the epilogue.
template <bool kUnit, DType dt>
__global__ void __launch_bounds__(128) expert_tiles_tc(MoeArgs a, Pass p) {
  using Half = std::conditional_t<dt == DType::kBF16, __nv_bfloat16, __half>;
  namespace wmma = nvcuda::wmma;
  constexpr int kParts = kUnit ? 2 : 1, kLd = kTileK + 8, kOutLd = kTile + 4;
  constexpr int kOperandBytes = (1 + kParts) * kTile * kLd * static_cast<int>(sizeof(Half));
  constexpr int kOutBytes = kParts * kTile * kOutLd * static_cast<int>(sizeof(float));
  __shared__ __align__(128) unsigned char smem[kOperandBytes > kOutBytes ? kOperandBytes : kOutBytes];
  auto* xs = reinterpret_cast<Half*>(smem);                 // [kTile][kLd]
  auto* ws = xs + kTile * kLd;                               // [kParts][kTile][kLd]
  auto* cs = reinterpret_cast<float*>(smem);                 // [kParts][kTile][kOutLd], after the products
  Tile t;
  if (!tile_of<kUnit>(a, p, t)) return;
  const int64_t count = t.count, m0 = t.m0, n0 = t.n0, k = t.k, n = t.n;
  const int warp = threadIdx.x / 32, wr = (warp / 2) * 32, wc = (warp % 2) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kParts][2][2];
#pragma unroll
  for (int q = 0; q < kParts; ++q) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) wmma::fill_fragment(acc[q][i][jj], 0.0f);
    }
  }
  constexpr int kGroups = kTileK / 8;  // 8-element groups per row of a k step
  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {  // k is a whole number of k steps
    for (int i = threadIdx.x; i < kTile * kGroups; i += 128) {
      const int r = i / kGroups, c = (i % kGroups) * 8;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + c;
      float v[8] = {};
      if (gm < count) {
        const float* src = kUnit ? a.x + t.list[gm] * k + gk : t.units + gm * k + gk;
        const float4 lo = *reinterpret_cast<const float4*>(src), hi = *reinterpret_cast<const float4*>(src + 4);
        v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
      }
      store8<Half>(xs + r * kLd + c, v);
#pragma unroll
      for (int q = 0; q < kParts; ++q) {
        float wv[8] = {};
        if (gn < n) load8<dt>(t.w[q] + gn * t.row_bytes, gk / 8, wv);
        store8<Half>(ws + (q * kTile + r) * kLd + c, wv);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, Half, wmma::row_major> xa[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(xa[i], xs + (wr + 16 * i) * kLd + kk, kLd);
#pragma unroll
      for (int q = 0; q < kParts; ++q) {
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, Half, wmma::col_major> wb;  // W^T: W's rows are its columns
          wmma::load_matrix_sync(wb, ws + (q * kTile + wc + 16 * jj) * kLd + kk, kLd);
#pragma unroll
          for (int i = 0; i < 2; ++i) wmma::mma_sync(acc[q][i][jj], xa[i], wb, acc[q][i][jj]);
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int q = 0; q < kParts; ++q) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        wmma::store_matrix_sync(cs + (q * kTile + wr + 16 * i) * kOutLd + wc + 16 * jj, acc[q][i][jj], kOutLd,
                                wmma::mem_row_major);
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTile * kTile; i += 128) {
    const int r = i / kTile, c = i % kTile;
    const int64_t gm = m0 + r, gn = n0 + c;
    if (gm >= count || gn >= n) continue;
    const float y = cs[r * kOutLd + c];
    t.out[gm * n + gn] = kUnit ? glu_value(a.act, y) * cs[(kTile + r) * kOutLd + c] : y;
  }
}

// The pass's terms added to out (the first pass starts from 0), in expert order.
__global__ void combine_gathered(MoeArgs a, Pass p) {
  for (const int64_t i : grid_stride(a.rows * a.dim)) {
    const int64_t r = i / a.dim, c = i % a.dim;
    float o = p.first == 0 ? 0.0f : a.out[i];
    for (int64_t j = 0; j < p.per && p.first + j < a.experts; ++j) {
      const int32_t place = p.places[r * p.per + j];
      if (place < 0) continue;
      const float w = a.weights[r * a.experts + p.first + j];
      o = __fadd_rn(o, __fmul_rn(p.outputs[(j * a.rows + place) * a.dim + c], w));
    }
    a.out[i] = o;
  }
}

template <bool kUnit, int MR>
void launch_direct(DType dt, dim3 grid, const MoeArgs& a, int64_t row_bytes, cudaStream_t s) {
  const dim3 block(kWarps * 32);
  switch (dt) {
    case DType::kF32: expert_direct<kUnit, MR, DType::kF32><<<grid, block, 0, s>>>(a, row_bytes); return;
    case DType::kF16: expert_direct<kUnit, MR, DType::kF16><<<grid, block, 0, s>>>(a, row_bytes); return;
    case DType::kBF16: expert_direct<kUnit, MR, DType::kBF16><<<grid, block, 0, s>>>(a, row_bytes); return;
    case DType::kQ8_0: expert_direct<kUnit, MR, DType::kQ8_0><<<grid, block, 0, s>>>(a, row_bytes); return;
    default: expert_direct<kUnit, MR, DType::kQ4_0><<<grid, block, 0, s>>>(a, row_bytes); return;
  }
}

template <int MR>
void run_direct(const MoeArgs& a, cudaStream_t s) {
  const dim3 units(static_cast<unsigned>((a.ffn + kWarps - 1) / kWarps), static_cast<unsigned>(a.experts));
  const dim3 outputs(static_cast<unsigned>((a.dim + kWarps - 1) / kWarps), static_cast<unsigned>(a.experts));
  const int64_t gb = stored_row_bytes(a.gate_dt, a.dim), db = stored_row_bytes(a.down_dt, a.ffn);
  launch_direct<true, MR>(a.gate_dt, units, a, gb, s);
  launch_direct<false, MR>(a.down_dt, outputs, a, db, s);
  combine_direct<<<blocks_for(a.rows * a.dim), kThreads, 0, s>>>(a);
}

template <bool kUnit>
void launch_tiles_tc(DType dt, dim3 grid, const MoeArgs& a, const Pass& p, cudaStream_t s) {
  switch (dt) {
    case DType::kF16: expert_tiles_tc<kUnit, DType::kF16><<<grid, 128, 0, s>>>(a, p); return;
    case DType::kBF16: expert_tiles_tc<kUnit, DType::kBF16><<<grid, 128, 0, s>>>(a, p); return;
    case DType::kQ8_0: expert_tiles_tc<kUnit, DType::kQ8_0><<<grid, 128, 0, s>>>(a, p); return;
    default: expert_tiles_tc<kUnit, DType::kQ4_0><<<grid, 128, 0, s>>>(a, p); return;
  }
}

void run_gathered(const MoeArgs& a, cudaStream_t s) {
  const auto row_tiles = static_cast<unsigned>((a.rows + kTile - 1) / kTile);
  const auto per = static_cast<unsigned>(a.experts_per_pass);
  const dim3 units(static_cast<unsigned>((a.ffn + kTile - 1) / kTile), row_tiles, per);
  const dim3 outputs(static_cast<unsigned>((a.dim + kTile - 1) / kTile), row_tiles, per);
  for (int64_t first = 0; first < a.experts; first += a.experts_per_pass) {
    const Pass p = pass_of(a, first);
    route<<<per, kRouteThreads, 0, s>>>(a, p);
    if (!a.tensor_cores) {
      expert_tiles<true><<<units, 256, 0, s>>>(a, p);
      expert_tiles<false><<<outputs, 256, 0, s>>>(a, p);
    } else {
      launch_tiles_tc<true>(a.gate_dt, units, a, p, s);
      launch_tiles_tc<false>(a.down_dt, outputs, a, p, s);
    }
    combine_gathered<<<blocks_for(a.rows * a.dim), kThreads, 0, s>>>(a, p);
  }
}

}  // namespace

void moe(const MoeArgs& a, const Launch& l) {
  if (a.rows == 0 || a.dim == 0) return;
  cudaStream_t s = stream_of(l);
  if (a.ffn == 0) {  // every unit is empty: each picked term is 0
    cudaMemsetAsync(a.out, 0, static_cast<size_t>(a.rows * a.dim) * sizeof(float), s);
    return;
  }
  if (a.gathered) return run_gathered(a, s);
  switch (a.rows) {
    case 1: return run_direct<1>(a, s);
    case 2: return run_direct<2>(a, s);
    case 3: return run_direct<3>(a, s);
    case 4: return run_direct<4>(a, s);
    case 5: return run_direct<5>(a, s);
    case 6: return run_direct<6>(a, s);
    case 7: return run_direct<7>(a, s);
    default: return run_direct<8>(a, s);
  }
}

}  // namespace kvf::exec::cuda::step
