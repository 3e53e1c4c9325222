// The batched-decode linears past gemm_rows' reach on Hopper (gemm_stream.cuh says how the
// kernel streams the weights); built for sm_90a alone. x is rounded to the weights' 16-bit
// type into the tensor-core scratch first (the group's norm applied as it is rounded, as
// gemm_rows does).
#include <cooperative_groups.h>
#include <algorithm>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "exec/cuda/device_props.h"
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
namespace cg = cooperative_groups;

// An output element of the tile: x row xr of weight row `row` of the tile's part (with a glu, the
// gate's and up's row), or none past the part's rows or x's.
struct Element {
  int64_t row = 0, xr = 0;
  bool live = false;
};

// Element e of a thread's accumulator vector j (gemm_stream.cuh's layout): weight row
// 16 warp + lane / 4 (+ 8 for e >= 2) of its 64-row half, x row 8 j + 2 (lane % 4) + e % 2.
// The unit's elements: with a glu the gate's rows (each with its up row), else both halves'.
template <bool GLU, int H, int N>
__device__ inline void unit_elements(const Args& a, int part, int row0, int j, int t, Element (&at)[N]) {
  const int warp = t / 32, lane = t % 32;
  const int64_t n = a.g.part[part].n;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int64_t r = row0 + 16 * warp + lane / 4 + (e >= 2 ? 8 : 0), xr = 8 * j + 2 * (lane % 4) + e % 2;
    at[e] = Element{r, xr, r < n && xr < a.m};
    if constexpr (!GLU && H == 2) at[4 + e] = Element{r + kHalfRows, xr, r + kHalfRows < n && xr < a.m};
  }
}

// The splits of a tile are one cluster: each block leaves its accumulators d in its own
// shared memory (`ring`, drained), and each then sums a share of the tile's columns across
// the cluster's blocks in split order (the same bits every launch) and stores them.
template <int kAcc, int H, bool GLU>
__device__ __forceinline__ void sum_and_store(const Args& a, const float (&d)[H][kAcc], unsigned char* ring, int part, int row0,
                                              int split) {
  // Accumulators as float4 [vector][thread]; vector h * kAcc / 4 + j holds d[h][4 j .. 4 j + 3].
  constexpr int kJs = kAcc / 4;
  float4* own = reinterpret_cast<float4*>(ring);
#pragma unroll
  for (int h = 0; h < H; ++h)
#pragma unroll
    for (int j = 0; j < kJs; ++j)
      own[(h * kJs + j) * kThreads + threadIdx.x] = make_float4(d[h][4 * j], d[h][4 * j + 1], d[h][4 * j + 2], d[h][4 * j + 3]);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const float4* peer[kMaxSplits];
#pragma unroll
  for (int r = 0; r < kMaxSplits; ++r) peer[r] = cluster.map_shared_rank(own, r < a.splits ? r : 0);
  // A unit: one thread's j of both halves, kJs * kThreads of them a tile.
  constexpr int kUnits = kJs * kThreads;
  const int u_end = kUnits * (split + 1) / a.splits;
  for (int u = kUnits * split / a.splits + static_cast<int>(threadIdx.x); u < u_end; u += kThreads) {
    const int j = u / kThreads, t = u % kThreads;
    // Every bias and residual is loaded before the first store (a store may alias a later
    // load: the residual is updated in place), and before the sums, which they overlap.
    constexpr int kN = GLU ? 4 : 4 * H;  // a glu stores a gate row and its up row as one element
    Element at[kN];
    unit_elements<GLU, H>(a, part, row0, j, t, at);
    gemv16_detail::ColumnAdds adds[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (at[i].live) adds[i] = gemv16_detail::column_adds<GLU>(a.g, a.g.part[part], at[i].row, static_cast<int>(at[i].xr));
    }
    float4 v[kMaxSplits][H];
#pragma unroll
    for (int r = 0; r < kMaxSplits; ++r) {
      if (r < a.splits) {
#pragma unroll
        for (int h = 0; h < H; ++h) v[r][h] = peer[r][(h * kJs + j) * kThreads + t];
      }
    }
    float4 sum[H];
#pragma unroll
    for (int h = 0; h < H; ++h) sum[h] = v[0][h];
#pragma unroll
    for (int r = 1; r < kMaxSplits; ++r) {
      if (r < a.splits) {
#pragma unroll
        for (int h = 0; h < H; ++h) sum[h].x += v[r][h].x, sum[h].y += v[r][h].y, sum[h].z += v[r][h].z, sum[h].w += v[r][h].w;
      }
    }
    // Gate (or first half) in sum[0], up (or second half) in sum[H - 1].
    const float lo[4] = {sum[0].x, sum[0].y, sum[0].z, sum[0].w};
    const float hi[4] = {sum[H - 1].x, sum[H - 1].y, sum[H - 1].z, sum[H - 1].w};
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (!at[i].live) continue;
      const float y = GLU || i < 4 ? lo[i % 4] : hi[i % 4], up = GLU ? hi[i] : 0.0f;
      gemv16_detail::store_column<GLU>(a.g, a.g.part[part], at[i].row, static_cast<int>(at[i].xr), y, up, adds[i]);
    }
  }
  // No block leaves while another may still read its shared memory.
  cluster.sync();
}

template <int BN, int S, int H, bool F16, bool GLU>
__global__ void __launch_bounds__(kThreads) gemm_stream_kernel(const __grid_constant__ Maps maps, const Args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!GLU || H == 2, "a glu's tile is its gate half and its up half");
  using Sh = Shape<BN, S, H>;
  constexpr int kAcc = BN / 2;  // accumulators a thread holds per 64-row half
  static_assert(H * kAcc * kThreads * 4 <= S * Sh::kStageBytes, "the accumulators fit the drained ring");
  extern __shared__ unsigned char smem[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
  const uint32_t bars = base + S * Sh::kStageBytes;
  auto w_slot = [&](int st) { return base + st * Sh::kStageBytes; };
  auto x_slot = [&](int st) { return base + st * Sh::kStageBytes + Sh::kWBytes; };
  auto bar = [&](int st) { return bars + 8 * st; };

  int tile = static_cast<int>(blockIdx.x), part = 0;
  while (part + 1 < kMaxParts && tile >= a.part_tiles[part]) tile -= a.part_tiles[part++];
  const int split = static_cast<int>(blockIdx.y);
  const int row0 = tile * (GLU ? kHalfRows : H * kHalfRows);  // the tile's first row of its part
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
    for (int h = 0; h < H; ++h)
      tma::load_2d(w_slot(st) + h * kHalfBytes, half_map[h], kChunk * (c_begin + c), half_row[h], bar(st));
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

  float d[H][kAcc];
#pragma unroll
  for (int h = 0; h < H; ++h)
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
      for (int h = 0; h < H; ++h)
        wgmma::mma_ss<F16, BN>(d[h], wgmma::desc(w_slot(st) + h * kHalfBytes + kk * 32, 16, 1024), dx);
    }
    wgmma::commit();
    wgmma::wait<0>();
#pragma unroll
    for (int h = 0; h < H; ++h) wgmma::fence_operands(d[h]);
    __syncthreads();
  }

  sum_and_store<kAcc, H, GLU>(a, d, smem + (base - static_cast<uint32_t>(__cvta_generic_to_shared(smem))), part, row0, split);
#else
  __trap();  // built for sm_90a only; the host checks the device before launching
#endif
}

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// The ring's depth: 3 stages of 24 KB at 64 rows of x (three blocks an SM with two halves),
// 4 for narrower x. On an H100, 64 rows: 61.7 us a layer's linears against 62.9 with 4
// stages, 67.9 with 6; 32 and 16 rows: 4 stages as fast as 3 or faster.
template <int BN>
constexpr int kStages = BN == 64 ? 3 : 4;

// The kernel's shared memory above 48 KB, asked for once; false where the device refuses it.
template <int BN, int H, bool F16, bool GLU>
bool opt_in() {
  static const bool opted_in = cudaFuncSetAttribute(gemm_stream_kernel<BN, kStages<BN>, H, F16, GLU>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    Shape<BN, kStages<BN>, H>::kSmemBytes) == cudaSuccess;
  return opted_in;
}

// How many of the kernel's blocks the device holds at once in clusters of each size (asked of
// the driver once: clusters are placed whole, within one GPC, so the count is not a multiple
// of the SMs).
template <int BN, int H, bool F16, bool GLU>
const plan::ClusterResidency& residency() {
  static const plan::ClusterResidency r = [] {
    plan::ClusterResidency out{};
    if (!opt_in<BN, H, F16, GLU>()) return out;
    for (int s = 1; s <= kMaxSplits; ++s) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(1, static_cast<unsigned>(s), 1);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = Shape<BN, kStages<BN>, H>::kSmemBytes;
      cudaLaunchAttribute cluster;
      cluster.id = cudaLaunchAttributeClusterDimension;
      cluster.val.clusterDim.x = 1;
      cluster.val.clusterDim.y = static_cast<unsigned>(s);
      cluster.val.clusterDim.z = 1;
      cfg.attrs = &cluster;
      cfg.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, gemm_stream_kernel<BN, kStages<BN>, H, F16, GLU>, &cfg) == cudaSuccess) {
        out[s] = static_cast<int64_t>(clusters) * s;
      } else {
        cudaGetLastError();  // a size the device cannot place: left at 0
      }
    }
    return out;
  }();
  return r;
}

// A map of a [rows, k] 16-bit matrix in boxes of 64 elements x box_rows rows.
bool encode(CUtensorMap* map, const void* base, int64_t rows, int64_t k, int box_rows, bool f16) {
  const uint64_t dims[2] = {static_cast<uint64_t>(k), static_cast<uint64_t>(rows)};
  const uint64_t strides[1] = {static_cast<uint64_t>(k) * 2};
  const uint32_t box[2] = {static_cast<uint32_t>(kChunk), static_cast<uint32_t>(box_rows)};
  return detail::encode_tensor_map(map, base, 2, dims, strides, box, f16);
}

// splits: 0 for the schedule's.
template <int BN, int H, bool F16, bool GLU>
bool launch(const Maps& maps, Args a, int splits, cudaStream_t s) {
  using Sh = Shape<BN, kStages<BN>, H>;
  auto* kernel = gemm_stream_kernel<BN, kStages<BN>, H, F16, GLU>;
  if (!opt_in<BN, H, F16, GLU>()) return false;
  const int tiles = tiles_of(a.g, H, a.part_tiles);
  a.splits = splits > 0 ? splits : plan::gemm_stream_schedule(tiles, a.k, residency<BN, H, F16, GLU>()).splits;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.splits));
  return launch_clustered(kernel, grid, dim3(1, static_cast<unsigned>(a.splits), 1), dim3(kThreads), Sh::kSmemBytes, s,
                          true, maps, a) == cudaSuccess;
}

// A glu's tiles are its gate and up halves; a group without one takes two halves a tile where
// those tiles fill the device, else one (plan::gemm_stream_halves).
template <int BN, bool F16>
bool launch_group(const Maps& maps, const Args& a, int splits, cudaStream_t s) {
  if (a.g.glu) return launch<BN, 2, F16, true>(maps, a, splits, s);
  int part_tiles[kMaxParts];
  const int tiles = tiles_of(a.g, 2, part_tiles);
  if (plan::gemm_stream_halves(tiles, residency<BN, 2, F16, false>()) == 2) return launch<BN, 2, F16, false>(maps, a, splits, s);
  return launch<BN, 1, F16, false>(maps, a, splits, s);
}

template <int BN>
bool launch_bn(const Maps& maps, const Args& a, int splits, bool f16, cudaStream_t s) {
  return f16 ? launch_group<BN, true>(maps, a, splits, s) : launch_group<BN, false>(maps, a, splits, s);
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
  GemmRowsScratch out;
  out.bytes = aligned(m * k * 2);
  return out;
}

bool run_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l, int splits) {
  const int chunks = static_cast<int>((k + kChunk - 1) / kChunk);
  if (l.tc.handle == nullptr || splits < 0 || splits > std::min(kMaxSplits, chunks)) return false;
  const GemmRowsScratch need = scratch(m, k, w_dt, g);
  if (need.bytes == 0 || l.tc.scratch_bytes < need.bytes) return false;
  const bool f16 = w_dt == DType::kF16;
  const int bn = x_tile(m);
  Maps maps;
  if (!encode(&maps.x, g.x16 != nullptr ? g.x16 : l.tc.scratch, m, k, bn, f16)) return false;
  for (int p = 0; p < kMaxParts; ++p) {
    if (p < g.parts && !encode(&maps.w[p], g.part[p].w, g.part[p].n, k, kHalfRows, f16)) return false;
    if (p >= g.parts) maps.w[p] = maps.w[0];
  }
  if (g.x16 == nullptr) round_group_x(x, m, k, w_dt, g, l.tc.scratch, l);
  Args a;
  a.m = m;
  a.k = k;
  a.chunks = chunks;
  a.g = g;
  switch (bn) {
    case 8: return launch_bn<8>(maps, a, splits, f16, stream_of(l));
    case 16: return launch_bn<16>(maps, a, splits, f16, stream_of(l));
    case 32: return launch_bn<32>(maps, a, splits, f16, stream_of(l));
    default: return launch_bn<64>(maps, a, splits, f16, stream_of(l));
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
