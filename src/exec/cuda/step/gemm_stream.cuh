// Linear groups of a batched decode past gemm_rows' reach (plan::kGemmStreamMin to
// kGemmStreamMax rows of x, 16-bit weights, Hopper only: built into gemm_stream_sm90a.cu).
// Still bound by the weight bytes, so the kernel is a stream of weight tiles with the
// multiplication riding along:
//   - A block owns a tile of one or two 64-row halves of weight rows (a glu's: 64 gate
//     rows and the matching 64 up rows; otherwise one half where two-half tiles, split as far
//     as a cluster goes, would leave the device idle) and walks k in chunks of 64 elements.
//     Each chunk's weight tile and the x rows' chunk land in shared memory by TMA, 128-byte
//     swizzled, in a ring of S stages: S - 1 chunks are on their way while one is multiplied.
//   - x's rows are the narrow side of wgmma m64nBNk16 (BN = 16, 32 or 64, the rows rounded
//     up): the weights are A, x is B, both K-major from shared memory, so x is read from
//     shared memory by the tensor cores' own path, once per chunk for the tile's halves.
//   - One thread of the warpgroup issues the loads; a stage is refilled once every warp has
//     passed the chunk that read it. The weights of the first S - 1 chunks are requested
//     before the block waits for the kernel in front (PDL), x's after.
//   - Too few tiles to give every resident block slot one are split over k, a tile's splits
//     one thread-block cluster (how many: plan::gemm_stream_schedule, from how many blocks
//     the driver places at once in clusters of each size). Each leaves its accumulators in
//     its shared memory, then sums a share of the tile's columns over the cluster in split
//     order (deterministic) and runs gemm_rows' epilogue on them: bias, then the glu, the
//     residual add or a store. No partial sums go through global memory and no block waits
//     for the tile's last.
#pragma once

#include <cuda.h>

#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/launch.cuh"
#include "plan/gemm_rows_schedule.h"

namespace kvf::exec::cuda::step::gemm_stream_detail {

inline constexpr int kChunk = static_cast<int>(plan::kGemmStreamChunk);  // k elements a stage: one 128-byte swizzle row
inline constexpr int kHalfBytes = 64 * kChunk * 2;       // one 64-row half's box: 8 KB
inline constexpr int kHalfRows = 64;    // weight rows of one wgmma (m64)
inline constexpr int kThreads = 128;    // one warpgroup
inline constexpr int kMaxParts = 3;
inline constexpr int kMaxSplits = static_cast<int>(plan::kGemmStreamMaxSplits);  // a portable cluster

// The x rows' tile: the rows rounded up to a wgmma n.
constexpr int x_tile(int64_t m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64; }

// A block's tile is H halves of 64 weight rows (a glu's: its gate rows and their up rows).
template <int BN, int S, int H>
struct Shape {
  static constexpr int kWBytes = H * kHalfBytes;
  static constexpr int kXBytes = BN * kChunk * 2;
  static constexpr int kStageBytes = kWBytes + kXBytes;   // a multiple of 1024: every tile stays swizzle-aligned
  static constexpr int kSmemBytes = S * kStageBytes + 8 * S + 1024;  // + barriers, + alignment slack
  static_assert(kStageBytes % 1024 == 0);
  static_assert(kSmemBytes + 1024 <= 228 * 1024, "one block fits an SM (228 KB, 1 KB reserved a block)");
};

// TMA maps of x [m, k] (boxes of 64 elements x BN rows) and of each part's weights [n, k]
// (boxes of 64 elements x 64 rows).
struct Maps {
  CUtensorMap x;
  CUtensorMap w[kMaxParts];
};

struct Args {
  int64_t m = 0, k = 0;
  int chunks = 0;                  // ceil(k / kChunk)
  int splits = 1;                  // a tile's blocks: one cluster, at most kMaxSplits
  int part_tiles[kMaxParts] = {};  // column tiles of each part (a glu: all of them the gate's)
  LinearGroup g;
};

// Column tiles of the group: 64 `halves` weight rows each, or with a glu 64 columns' gate
// and up rows.
inline int tiles_of(const LinearGroup& g, int halves, int (&part_tiles)[kMaxParts]) {
  int total = 0;
  for (int p = 0; p < kMaxParts; ++p) {
    part_tiles[p] = 0;
    if (p >= g.parts || (g.glu && p > 0)) continue;
    const int64_t rows = g.glu ? kHalfRows : kHalfRows * halves;
    part_tiles[p] = static_cast<int>((g.part[p].n + rows - 1) / rows);
    total += part_tiles[p];
  }
  return total;
}

// The kernel for any 1 to 64 rows, whatever the step's choice of kernel for them
// (linear_group_stream keeps to plan::kGemmStreamMin..kGemmStreamMax; the benchmark runs it
// at any rows): whether the shape is one it takes, the scratch it needs, and the run (x
// rounded, then the launch; false, launching nothing, where it does not fit). `splits`: the
// splits of k a tile (1 to kMaxSplits, no more than k's chunks); 0, the schedule's.
bool shape_fits(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
GemmRowsScratch scratch(int64_t m, int64_t k, DType w_dt, const LinearGroup& g);
bool run_group(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l, int splits = 0);

}  // namespace kvf::exec::cuda::step::gemm_stream_detail
