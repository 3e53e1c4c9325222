// How a GPU runs a linear group over kGemmRowsMin to kGemmRowsMax rows of x with 16-bit weights (a
// batched decode step; exec/cuda/step/gemm_rows.cuh): column tiles of kGemmRowsTileRows
// weight rows a block, and, when those tiles are too few to keep every SM streaming weights,
// each tile's k split over several blocks whose partial sums the tile's last block adds.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kvf::plan {

// The rows where it beats the alternatives on the H200 (docs/benchmarks.md, bench_cuda_gemv;
// a step's rows are padded to a power of two, so this is the 8-row step): up to 4 rows the
// gemv kernels (fused norm, no rounding of x) are as fast or faster; from 16 rows cuBLASLt
// is, and from 17 the kernel's reads of x from shared memory (every 16-row tile for every
// pair of weight tiles) outgrow the weights'.
inline constexpr int64_t kGemmRowsMin = 5, kGemmRowsMax = 8;
// Weight rows of one column tile: 4 warps of 2 tiles of 8 rows (with a glu, 32 columns'
// gate and up rows).
inline constexpr int64_t kGemmRowsTileRows = 64;
// A split walks at least this many elements of k: shorter ones spend more on their partial
// sums than they save.
inline constexpr int64_t kGemmRowsMinSplitK = 256;

struct GemmRowsSchedule {
  int64_t tiles = 0;
  int splits = 1;
};

// `weight_rows`: the group's weight rows (gate and up together with a glu); `sms`: the
// device's multiprocessors; `tile_rows`: weight rows a block takes. About two blocks an SM.
inline GemmRowsSchedule gemm_rows_schedule(int64_t weight_rows, int64_t k, int sms,
                                           int64_t tile_rows = kGemmRowsTileRows) {
  GemmRowsSchedule s;
  s.tiles = (weight_rows + tile_rows - 1) / tile_rows;
  const int64_t want = (2 * std::max(sms, 1) + s.tiles - 1) / s.tiles;
  s.splits = static_cast<int>(std::clamp<int64_t>(want, 1, std::max<int64_t>(1, k / kGemmRowsMinSplitK)));
  return s;
}

// The batched decode past kGemmRowsMax rows on Hopper (exec/cuda/step/gemm_stream_sm90a.cu):
// weight tiles and x brought into shared memory by TMA, kGemmStreamChunk elements of k a
// stage, multiplied by wgmma with x's rows as the narrow side. Past kGemmStreamMax rows,
// cuBLASLt.
inline constexpr int64_t kGemmStreamMin = 9, kGemmStreamMax = 64;
// Up to this many rows the streaming kernel takes every group; past it only groups of
// several parts (q, k and v; gate and up), which cuBLASLt runs as one product a part (the
// small k and v products bound by their launch, not their bytes) and a gated unit after
// them. Measured on a batched decode of TinyLlama (docs/benchmarks.md): at 64 rows the
// single-part groups (o, down) are faster on cuBLASLt, the others on the streaming kernel.
inline constexpr int64_t kGemmStreamEveryGroupMax = 32;

// Whether a batched decode's linear group of `m` rows and `parts` parts runs on the streaming
// kernel (where it fits) rather than cuBLASLt.
inline bool gemm_stream_chosen(int64_t m, int parts) {
  return m >= kGemmStreamMin && m <= kGemmStreamMax && (m <= kGemmStreamEveryGroupMax || parts > 1);
}
inline constexpr int64_t kGemmStreamChunk = 64;
// A split walks at least this many chunks of k; a tile's splits are one cluster of at most
// kGemmStreamMaxSplits blocks (their sums meet in distributed shared memory).
inline constexpr int64_t kGemmStreamMinSplitChunks = 4;
inline constexpr int64_t kGemmStreamMaxSplits = 8;

// `tiles`: the group's column tiles; `blocks_per_sm`: how many of the kernel's blocks an SM
// holds at once. Splits k until every resident slot has a block, no split shorter than
// kGemmStreamMinSplitChunks chunks and no more than kGemmStreamMaxSplits splits.
inline GemmRowsSchedule gemm_stream_schedule(int64_t tiles, int64_t k, int sms, int blocks_per_sm) {
  GemmRowsSchedule s;
  s.tiles = tiles;
  const int64_t chunks = (k + kGemmStreamChunk - 1) / kGemmStreamChunk;
  const int64_t slots = static_cast<int64_t>(std::max(sms, 1)) * std::max(blocks_per_sm, 1);
  const int64_t want = (slots + std::max<int64_t>(tiles, 1) - 1) / std::max<int64_t>(tiles, 1);
  const int64_t most = std::min(kGemmStreamMaxSplits, std::max<int64_t>(1, chunks / kGemmStreamMinSplitChunks));
  s.splits = static_cast<int>(std::clamp<int64_t>(want, 1, most));
  return s;
}

}  // namespace kvf::plan
