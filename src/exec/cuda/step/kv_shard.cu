// kv_shard_map (kernels.h). By position, a rank's j-th key is in its (j / block)-th block,
// which is block (j / block) * ranks + rank of the row: every block before the last is whole,
// so each word is placed on its own, a thread a word over a grid of (words, rows). In a pool
// shared out by blocks, which words are the rank's depends on the slots, so a row is scanned
// in tiles of kKvShardTile words side by side, in two passes: the first counts the rank's
// words of each tile, the second places a tile's words behind the earlier tiles' counts.
#include <algorithm>

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

// plan::KvShards::count on the device: how many of positions [0, n) the rank holds.
__device__ int64_t shard_count(int64_t n, int64_t block, int rank, int ranks) {
  const int64_t full = n / block, tail = n % block;
  const int64_t full_here = full / ranks + (rank < full % ranks ? 1 : 0);
  const bool tail_here = tail > 0 && full % ranks == rank;
  return full_here * block + (tail_here ? tail : 0);
}

__device__ int64_t live_keys(const KvShardMap& a, int64_t b) {
  return min(static_cast<int64_t>(max(a.lens[b], 0)), a.stride);
}

// Mask row r of batch row b: the source's, and the rank's local one.
__device__ const float* mask_row(const KvShardMap& a, int64_t b, int64_t r) {
  return a.mask + ((a.mask_batch == 1 ? 0 : b) * a.mask_rows + r) * a.stride;
}
__device__ float* local_mask_row(const KvShardMap& a, int64_t b, int64_t r) {
  return a.local_mask + ((a.local_mask_batch == 1 ? 0 : b) * a.mask_rows + r) * a.stride;
}

// Key j' of row b's mask row r (of the source) as the rank's key j of local mask row r.
__device__ void copy_mask_column(const KvShardMap& a, int64_t b, int64_t from, int64_t to, bool past) {
  for (int64_t r = 0; r < a.mask_rows; ++r) local_mask_row(a, b, r)[to] = past ? -INFINITY : mask_row(a, b, r)[from];
}

// Grid (words / kThreads, batch): word j of row b.
__global__ void kv_shard_by_position_kernel(KvShardMap a) {
  const int64_t b = blockIdx.y, j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t here = shard_count(live_keys(a, b), a.block, a.rank, a.ranks);
  if (j == 0) a.local_lens[b] = static_cast<int32_t>(here);
  if (j >= a.stride) return;
  const int64_t t = ((j / a.block) * a.ranks + a.rank) * a.block + j % a.block;
  int32_t entry = 0;
  if (j < here) entry = a.map != nullptr ? a.map[b * a.stride + t] : static_cast<int32_t>(t);
  a.local_map[b * a.stride + j] = entry;
  // A shared mask is the rank's keys of every row: its entries below the stride, whichever
  // row's length reaches them.
  if (b < a.local_mask_batch) copy_mask_column(a, b, t, j, t >= a.stride);
}

// plan::PoolShards on the device.
__device__ bool owns(const KvShardMap& a, int32_t slot) { return (slot / a.block) % a.ranks == a.rank; }
__device__ int32_t share_row(const KvShardMap& a, int32_t slot) {
  return static_cast<int32_t>((slot / a.block / a.ranks) * a.block + slot % a.block);
}

// A thread's words of its tile: kWords in a run, so that a thread's own order is the row's.
constexpr int kWords = static_cast<int>(kKvShardTile / kThreads);
static_assert(kWords * kThreads == kKvShardTile);

struct TileWords {
  int32_t slot[kWords];
  unsigned mine = 0;  // bit i: word i is the rank's
};

__device__ TileWords tile_words(const KvShardMap& a, int64_t b, int64_t j0, int64_t live) {
  TileWords w;
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    const int64_t j = j0 + i;
    w.slot[i] = j < live ? a.map[b * a.stride + j] : 0;
    if (j < live && owns(a, w.slot[i])) w.mine |= 1u << i;
  }
  return w;
}

// The sum of v over the block (kThreads threads), and the sum over the threads before this one.
struct BlockSums {
  int before = 0, total = 0;
};

__device__ BlockSums block_scan(int v) {
  __shared__ int warp_totals[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int inclusive = v;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int n = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += n;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  BlockSums s{inclusive - v, 0};
  for (int w = 0; w < kThreads / 32; ++w) {
    s.before += w < warp ? warp_totals[w] : 0;
    s.total += warp_totals[w];
  }
  return s;
}

// Grid (tiles, batch): the rank's words of tile blockIdx.x of row b.
__global__ void kv_shard_count_kernel(KvShardMap a) {
  const int64_t b = blockIdx.y, live = live_keys(a, b), j0 = blockIdx.x * kKvShardTile + threadIdx.x * kWords;
  const BlockSums s = block_scan(__popc(tile_words(a, b, j0, live).mine));
  if (threadIdx.x == 0) a.tile_counts[b * gridDim.x + blockIdx.x] = s.total;
}

// The sum of row b's tile counts in [0, end), by the first warp (for every thread).
__device__ int tiles_sum(const KvShardMap& a, int64_t b, unsigned end) {
  __shared__ int sum;
  if (threadIdx.x < 32) {
    int v = 0;
    for (unsigned t = threadIdx.x; t < end; t += 32) v += a.tile_counts[b * gridDim.x + t];
#pragma unroll
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
    if (threadIdx.x == 0) sum = v;
  }
  __syncthreads();
  const int s = sum;
  __syncthreads();  // sum is read by all before anyone writes it again
  return s;
}

// The mask entries of the tile's words in w.mine, of every mask row, from `at` on. A row's loads
// are all issued before its first store: a store to local_mask could alias a later load of
// mask as far as the compiler knows, so a load behind a store would wait for it.
__device__ void copy_mask_columns(const KvShardMap& a, int64_t b, int64_t j0, const TileWords& w, int64_t at) {
  for (int64_t r = 0; r < a.mask_rows; ++r) {
    const float* from = mask_row(a, b, r) + j0;
    float v[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) v[i] = w.mine >> i & 1u ? from[i] : 0.0f;
    float* to = local_mask_row(a, b, r) + at;
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if (w.mine >> i & 1u) *to++ = v[i];
    }
  }
}

__global__ void kv_shard_place_kernel(KvShardMap a) {
  const int64_t b = blockIdx.y, live = live_keys(a, b), j0 = blockIdx.x * kKvShardTile + threadIdx.x * kWords;
  if (blockIdx.x == 0) {
    const int all = tiles_sum(a, b, gridDim.x);
    if (threadIdx.x == 0) a.local_lens[b] = all;
  }
  if (blockIdx.x * kKvShardTile >= live) return;
  const int64_t taken = tiles_sum(a, b, blockIdx.x);
  const TileWords w = tile_words(a, b, j0, live);
  const int64_t at = taken + block_scan(__popc(w.mine)).before;
  int32_t* to = a.local_map + b * a.stride + at;
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if (w.mine >> i & 1u) *to++ = share_row(a, w.slot[i]);
  }
  if (a.mask_batch > 0) copy_mask_columns(a, b, j0, w, at);
}

}  // namespace

void kv_shard_map(const KvShardMap& a, const Launch& l) {
  if (a.batch <= 0) return;
  if (a.pool) {
    const dim3 grid(static_cast<unsigned>(kv_shard_tiles(a.stride)), static_cast<unsigned>(a.batch));
    kv_shard_count_kernel<<<grid, kThreads, 0, stream_of(l)>>>(a);
    kv_shard_place_kernel<<<grid, kThreads, 0, stream_of(l)>>>(a);
  } else {
    const dim3 grid(static_cast<unsigned>(std::max<int64_t>((a.stride + kThreads - 1) / kThreads, 1)), static_cast<unsigned>(a.batch));
    kv_shard_by_position_kernel<<<grid, kThreads, 0, stream_of(l)>>>(a);
  }
}

}  // namespace kvf::exec::cuda::step
