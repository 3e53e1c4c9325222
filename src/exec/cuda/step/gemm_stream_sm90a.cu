// The batched-decode linears past gemm_rows' reach on Hopper (gemm_stream.cuh says how the
// kernel streams the weights); built for sm_90a alone. x is rounded to the weights' 16-bit
// type into the tensor-core scratch first (the group's norm applied as it is rounded, as
// gemm_rows does), the split tiles' partial sums follow it there.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "exec/cuda/device_props.h"
#include "exec/cuda/mma_ptx.cuh"
#include "exec/cuda/step/gemm_stream.cuh"
#include "exec/cuda/tensor_map.h"
#include "exec/cuda/tma_ptx.cuh"
#include "exec/cuda/wgmma_ptx.cuh"
#include "plan/gemm_rows_schedule.h"

namespace kvf::exec::cuda::step {
namespace gemm_stream_detail {
namespace {

namespace tma = kvf::exec::cuda::detail::tma;
namespace wgmma = kvf::exec::cuda::detail::wgmma;
namespace ptx = kvf::exec::cuda::detail::ptx;

// One column of the output: x row xr of weight row `row` (of the tile's part; with a glu the
// gate's and up's row), its two products, the epilogue's adds loaded just before the store.
template <bool GLU>
__device__ inline void store(const Args& a, int part, int64_t row, int64_t xr, float y, float up) {
  const LinearPart& p = a.g.part[part];
  if (row >= p.n || xr >= a.m) return;
  gemv16_detail::store_column<GLU>(a.g, p, row, static_cast<int>(xr), y, up);
}

template <int BN, int S, bool F16, bool GLU>
__global__ void __launch_bounds__(kThreads) gemm_stream_kernel(const __grid_constant__ Maps maps, const Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Sh = Shape<BN, S>;
  constexpr int kAcc = BN / 2;  // accumulators a thread holds per 64-row half
  extern __shared__ unsigned char smem[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  const uint32_t bars = base + S * Sh::kStageBytes;
  auto w_slot = [&](int st) { return base + st * Sh::kStageBytes; };
  auto x_slot = [&](int st) { return base + st * Sh::kStageBytes + Sh::kWBytes; };
  auto bar = [&](int st) { return bars + 8 * st; };

  int tile = static_cast<int>(blockIdx.x), part = 0;
  while (part + 1 < kMaxParts && tile >= a.part_tiles[part]) tile -= a.part_tiles[part++];
  const int split = static_cast<int>(blockIdx.y);
  const int row0 = tile * (GLU ? kHalfRows : kTileRows);  // the tile's first row of its part
  const CUtensorMap* half_map[2] = {&maps.w[part], GLU ? &maps.w[1] : &maps.w[part]};
  const int half_row[2] = {row0, GLU ? row0 : row0 + kHalfRows};
  const int c_begin = a.chunks * split / a.splits, chunks = a.chunks * (split + 1) / a.splits - c_begin;

  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) tma::mbar_init(bar(st), 1);
    tma::mbar_fence_init();
  }
  __syncthreads();
  auto load_w = [&](int c) {
    const int st = c % S;
    tma::mbar_arrive_expect_tx(bar(st), Sh::kStageBytes);
    for (int h = 0; h < 2; ++h)
      tma::load_2d(w_slot(st) + h * (kHalfRows * 128), half_map[h], kChunk * (c_begin + c), half_row[h], bar(st));
  };
  auto load_x = [&](int c) { tma::load_2d(x_slot(c % S), &maps.x, kChunk * (c_begin + c), 0, bar(c % S)); };
  // The weights never depend on the kernel in front; x does.
  if (threadIdx.x == 0) {
    for (int c = 0; c < S - 1 && c < chunks; ++c) load_w(c);
  }
  await_kernel_in_front();
  if (threadIdx.x == 0) {
    for (int c = 0; c < S - 1 && c < chunks; ++c) load_x(c);
  }

  float d[2][kAcc];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) d[h][i] = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    // Into the stage chunk c - 1 read: every warp passed the barrier behind it.
    if (threadIdx.x == 0 && c + S - 1 < chunks) {
      load_w(c + S - 1);
      load_x(c + S - 1);
    }
    const int st = c % S;
    tma::mbar_wait(bar(st), (c / S) & 1);
    wgmma::fence();
    // K-major operands: one k16 step is 32 bytes into the 128-byte rows.
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk) {
      const uint64_t dx = wgmma::desc(x_slot(st) + kk * 32, 16, 1024);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        wgmma::mma_ss<F16, BN>(d[h], wgmma::desc(w_slot(st) + h * (kHalfRows * 128) + kk * 32, 16, 1024), dx);
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operands(d[0]);
    wgmma::fence_operands(d[1]);
    __syncthreads();
  }

  if (a.splits > 1) {
    // Partials as float4 [tile][split][vector][thread]: coalesced, and each thread of the
    // reducing block reads back the positions it wrote.
    constexpr int kVecs = 2 * kAcc / 4;
    auto* p = reinterpret_cast<float4*>(a.partials);
    const int64_t own = (static_cast<int64_t>(blockIdx.x) * a.splits + split) * kVecs * kThreads + threadIdx.x;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const float* src = &d[v / (kAcc / 4)][4 * (v % (kAcc / 4))];
      __stcg(p + own + v * kThreads, make_float4(src[0], src[1], src[2], src[3]));
    }
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
      last = ptx::atom_inc_acq_rel(a.counters + blockIdx.x, static_cast<unsigned>(a.splits - 1)) ==
             static_cast<unsigned>(a.splits - 1);
    }
    __syncthreads();
    if (!last) return;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) d[h][i] = 0.0f;
    for (int s = 0; s < a.splits; ++s) {
      const float4* q = p + (static_cast<int64_t>(blockIdx.x) * a.splits + s) * kVecs * kThreads + threadIdx.x;
      float4 v[kVecs];
#pragma unroll
      for (int j = 0; j < kVecs; ++j) v[j] = __ldcg(q + j * kThreads);
#pragma unroll
      for (int j = 0; j < kVecs; ++j) {
        float* dst = &d[j / (kAcc / 4)][4 * (j % (kAcc / 4))];
        dst[0] += v[j].x, dst[1] += v[j].y, dst[2] += v[j].z, dst[3] += v[j].w;
      }
    }
  }

  // d[h][4 j + e]: weight row 16 warp + lane / 4 (+ 8 for e >= 2) of half h, x row
  // 8 j + 2 (lane % 4) + e % 2.
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t r = 16 * warp + lane / 4 + (e >= 2 ? 8 : 0), xr = 8 * j + 2 * (lane % 4) + e % 2;
      if constexpr (GLU) {
        store<true>(a, 0, row0 + r, xr, d[0][4 * j + e], d[1][4 * j + e]);
      } else {
        store<false>(a, part, row0 + r, xr, d[0][4 * j + e], 0.0f);
        store<false>(a, part, row0 + kHalfRows + r, xr, d[1][4 * j + e], 0.0f);
      }
    }
  }
#else
  __trap();  // built for sm_90a only; the host checks the device before launching
#endif
}

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// The ring's depth: 4 stages of up to 24 KB, two blocks an SM at 64 rows of x.
constexpr int kStages = 4;

template <int BN>
plan::GemmRowsSchedule schedule(int64_t k, const LinearGroup& g) {
  int part_tiles[kMaxParts];
  const int tiles = tiles_of(g, part_tiles);
  return plan::gemm_stream_schedule(tiles, k, detail::sm_count(), Shape<BN, kStages>::kBlocksPerSm);
}

plan::GemmRowsSchedule schedule_for(int64_t m, int64_t k, const LinearGroup& g) {
  switch (x_tile(m)) {
    case 8: return schedule<8>(k, g);
    case 16: return schedule<16>(k, g);
    case 32: return schedule<32>(k, g);
    default: return schedule<64>(k, g);
  }
}

// A map of a [rows, k] 16-bit matrix in boxes of 64 elements x box_rows rows.
bool encode(CUtensorMap* map, const void* base, int64_t rows, int64_t k, int box_rows, bool f16) {
  const uint64_t dims[2] = {static_cast<uint64_t>(k), static_cast<uint64_t>(rows)};
  const uint64_t strides[1] = {static_cast<uint64_t>(k) * 2};
  const uint32_t box[2] = {static_cast<uint32_t>(kChunk), static_cast<uint32_t>(box_rows)};
  return detail::encode_tensor_map(map, base, 2, dims, strides, box, f16);
}

template <int BN, bool F16, bool GLU>
bool launch(const Maps& maps, const Args& a, int tiles, cudaStream_t s) {
  using Sh = Shape<BN, kStages>;
  auto* kernel = gemm_stream_kernel<BN, kStages, F16, GLU>;
  static const bool opted_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Sh::kSmemBytes) == cudaSuccess;
  if (!opted_in) return false;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.splits));
  return launch_programmatic(kernel, grid, dim3(kThreads), Sh::kSmemBytes, s, true, maps, a) == cudaSuccess;
}

template <int BN>
bool launch_bn(const Maps& maps, const Args& a, int tiles, bool f16, cudaStream_t s) {
  if (f16) return a.g.glu ? launch<BN, true, true>(maps, a, tiles, s) : launch<BN, true, false>(maps, a, tiles, s);
  return a.g.glu ? launch<BN, false, true>(maps, a, tiles, s) : launch<BN, false, false>(maps, a, tiles, s);
}

}  // namespace

bool shape_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  if ((w_dt != DType::kF16 && w_dt != DType::kBF16) || m < 1 || m > 64) return false;
  // TMA: rows start on 16-byte boundaries; its coordinates are 32-bit.
  if (k % 8 != 0 || k >= (int64_t{1} << 30) || g.parts < 1 || g.parts > kMaxParts || (g.glu && g.parts != 2)) return false;
  if (g.residual_out != nullptr && g.parts != 1) return false;
  if (g.glu && g.part[0].n != g.part[1].n) return false;
  for (int p = 0; p < g.parts; ++p) {
    if (g.part[p].n < 1 || g.part[p].n >= (int64_t{1} << 30) || !detail::aligned(g.part[p].w, 16)) return false;
  }
  return detail::is_sm90();
}

GemmRowsScratch scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  if (!shape_fits(m, k, w_dt, g)) return {};
  const plan::GemmRowsSchedule s = schedule_for(m, k, g);
  GemmRowsScratch out;
  out.bytes = aligned(m * k * 2);
  if (s.splits > 1) out.bytes += 4 * partial_floats(s.tiles, s.splits, x_tile(m));
  out.counters = s.tiles;
  return out;
}

bool run_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (l.tc.handle == nullptr) return false;
  const GemmRowsScratch need = scratch(m, k, w_dt, g);
  if (need.bytes == 0 || l.tc.scratch_bytes < need.bytes || l.tc.counter_count < need.counters) return false;
  const bool f16 = w_dt == DType::kF16;
  const int bn = x_tile(m);
  Maps maps;
  if (!encode(&maps.x, l.tc.scratch, m, k, bn, f16)) return false;
  for (int p = 0; p < kMaxParts; ++p) {
    if (p < g.parts && !encode(&maps.w[p], g.part[p].w, g.part[p].n, k, kHalfRows, f16)) return false;
    if (p >= g.parts) maps.w[p] = maps.w[0];
  }
  round_group_x(x, m, k, w_dt, g, l.tc.scratch, l);
  Args a;
  a.m = m;
  a.k = k;
  a.chunks = static_cast<int>((k + kChunk - 1) / kChunk);
  const int tiles = tiles_of(g, a.part_tiles);
  a.splits = schedule_for(m, k, g).splits;
  a.partials = reinterpret_cast<float*>(static_cast<uint8_t*>(l.tc.scratch) + aligned(m * k * 2));
  a.counters = l.tc.counters;
  a.g = g;
  switch (bn) {
    case 8: return launch_bn<8>(maps, a, tiles, f16, stream_of(l));
    case 16: return launch_bn<16>(maps, a, tiles, f16, stream_of(l));
    case 32: return launch_bn<32>(maps, a, tiles, f16, stream_of(l));
    default: return launch_bn<64>(maps, a, tiles, f16, stream_of(l));
  }
}

}  // namespace gemm_stream_detail

bool gemm_stream_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  return m >= plan::kGemmStreamMin && m <= plan::kGemmStreamMax && gemm_stream_detail::shape_fits(m, k, w_dt, g);
}

GemmRowsScratch gemm_stream_scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g) {
  return gemm_stream_fits(m, k, w_dt, g) ? gemm_stream_detail::scratch(m, k, w_dt, g) : GemmRowsScratch{};
}

bool linear_group_stream(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  return gemm_stream_fits(m, k, w_dt, g) && gemm_stream_detail::run_group(x, m, k, w_dt, g, l);
}

}  // namespace kvf::exec::cuda::step
