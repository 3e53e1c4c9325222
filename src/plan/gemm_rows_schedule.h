// How a GPU runs a linear group over kGemmRowsMin to kGemmRowsMax rows of x with 16-bit weights (a
// batched decode step; exec/cuda/step/gemm_rows.cuh): column tiles of kGemmRowsTileRows
// weight rows a block, and, when those tiles are too few to keep every SM streaming weights,
// each tile's k split over several blocks whose partial sums the tile's last block adds.
#pragma once

#include <algorithm>
#include <array>
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

// A tile's splits run as one cluster, and clusters are placed whole: how many of the kernel's
// blocks the device holds at once depends on the cluster size. resident[s]: the blocks in
// clusters of s that fit at once (0: clusters of s do not launch).
using ClusterResidency = std::array<int64_t, kGemmStreamMaxSplits + 1>;

// The same count where clusters pack without loss: `blocks_per_sm` on each of `sms`.
inline ClusterResidency uniform_residency(int sms, int blocks_per_sm) {
  ClusterResidency r{};
  const int64_t slots = static_cast<int64_t>(std::max(sms, 0)) * std::max(blocks_per_sm, 0);
  for (int64_t s = 1; s <= kGemmStreamMaxSplits; ++s) r[s] = slots / s * s;
  return r;
}

// Weight rows a tile of a group without a glu, in 64-row halves (one wgmma m64 each): two,
// unless their tiles split as far as a cluster goes would still leave resident blocks idle
// (o and down of TinyLlama at 2,048 rows: 16 tiles, 128 blocks for 264 places), then one,
// which doubles the blocks.
inline int gemm_stream_halves(int64_t tiles_of_two, const ClusterResidency& resident_two) {
  return tiles_of_two * kGemmStreamMaxSplits < resident_two[kGemmStreamMaxSplits] ? 1 : 2;
}

// What a block spends besides its own chunks, counted in chunks: the ring's first loads
// arrive before its first product, and the cluster's sums and stores come after the last.
// Fitted to the 64-row sweep of splits on an H100 (docs/benchmarks.md).
inline constexpr int64_t kGemmStreamRampChunks = 4;

// The splits of k that finish the group first: a block takes its split's chunks plus the
// ramp, and the blocks beyond those resident at once run in further waves. A wave short of
// the device is still one wave, so the splits fill the resident blocks when they can; one
// more split than fits costs a whole second wave (88 tiles of gate and up at 2,048: 3
// splits would be 264 blocks, but clusters of 3 hold 237 on an H100, so 2). No split
// under kGemmStreamMinSplitChunks chunks, none past kGemmStreamMaxSplits, none where the
// tiles alone fill the device (splits are there to fill it); ties go to fewer.
inline GemmRowsSchedule gemm_stream_schedule(int64_t tiles, int64_t k, const ClusterResidency& resident) {
  GemmRowsSchedule s;
  s.tiles = std::max<int64_t>(tiles, 1);
  const int64_t chunks = (k + kGemmStreamChunk - 1) / kGemmStreamChunk;
  const int64_t by_k = std::min(kGemmStreamMaxSplits, std::max<int64_t>(1, chunks / kGemmStreamMinSplitChunks));
  const int64_t most = s.tiles >= resident[1] ? 1 : by_k;
  int64_t best = -1;
  for (int64_t splits = 1; splits <= most; ++splits) {
    if (resident[splits] < splits) continue;
    const int64_t waves = (s.tiles * splits + resident[splits] - 1) / resident[splits];
    const int64_t cost = waves * ((chunks + splits - 1) / splits + kGemmStreamRampChunks);
    if (best < 0 || cost < best) best = cost, s.splits = static_cast<int>(splits);
  }
  return s;
}

}  // namespace kvf::plan
