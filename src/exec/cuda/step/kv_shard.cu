// kv_shard_map (kernels.h): one block per batch row, its threads over the row's map words.
// By position, a rank's j-th key is in its (j / block)-th block, which is block
// (j / block) * ranks + rank of the row: every block before the last is whole, so no scan is
// needed. In a pool shared out by blocks, which words are the rank's depends on the slots,
// so the block counts them in a scan as it goes.
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

// Key j' of row b's mask row r (of the source) as the rank's key j of local mask row r.
__device__ void copy_mask_column(const KvShardMap& a, int64_t b, int64_t from, int64_t to, bool past) {
  const int64_t mb = a.mask_batch == 1 ? 0 : b, lb = a.local_mask_batch == 1 ? 0 : b;
  for (int64_t r = 0; r < a.mask_rows; ++r) {
    a.local_mask[(lb * a.mask_rows + r) * a.stride + to] = past ? -INFINITY : a.mask[(mb * a.mask_rows + r) * a.stride + from];
  }
}

__global__ void kv_shard_by_position_kernel(KvShardMap a) {
  const int64_t b = blockIdx.x;
  const int64_t here = shard_count(live_keys(a, b), a.block, a.rank, a.ranks);
  if (threadIdx.x == 0) a.local_lens[b] = static_cast<int32_t>(here);
  for (int64_t j = threadIdx.x; j < a.stride; j += blockDim.x) {
    const int64_t t = ((j / a.block) * a.ranks + a.rank) * a.block + j % a.block;
    int32_t entry = 0;
    if (j < here) entry = a.map != nullptr ? a.map[b * a.stride + t] : static_cast<int32_t>(t);
    a.local_map[b * a.stride + j] = entry;
    // A shared mask is the rank's keys of every row: its entries below the stride, whichever
    // row's length reaches them.
    if (b < a.local_mask_batch) copy_mask_column(a, b, t, j, t >= a.stride);
  }
}

// plan::PoolShards on the device.
__device__ bool owns(const KvShardMap& a, int32_t slot) { return (slot / a.block) % a.ranks == a.rank; }
__device__ int32_t share_row(const KvShardMap& a, int32_t slot) {
  return static_cast<int32_t>((slot / a.block / a.ranks) * a.block + slot % a.block);
}

__global__ void kv_shard_of_pool_kernel(KvShardMap a) {
  __shared__ int counts[kThreads / 32];
  const int64_t b = blockIdx.x, live = live_keys(a, b);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t taken = 0;  // the rank's keys among the words before this tile
  for (int64_t j0 = 0; j0 < live; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const int32_t slot = j < live ? a.map[b * a.stride + j] : 0;
    const bool mine = j < live && owns(a, slot);
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) counts[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, tile = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      before += w < warp ? counts[w] : 0;
      tile += counts[w];
    }
    if (mine) {
      const int64_t at = taken + before + __popc(ballot & ((1u << lane) - 1u));
      a.local_map[b * a.stride + at] = share_row(a, slot);
      if (a.mask_batch > 0) copy_mask_column(a, b, j, at, false);
    }
    taken += tile;
    __syncthreads();  // counts is the next tile's
  }
  if (threadIdx.x == 0) a.local_lens[b] = static_cast<int32_t>(taken);
}

}  // namespace

void kv_shard_map(const KvShardMap& a, const Launch& l) {
  if (a.batch <= 0) return;
  if (a.pool) {
    kv_shard_of_pool_kernel<<<static_cast<unsigned>(a.batch), kThreads, 0, stream_of(l)>>>(a);
  } else {
    kv_shard_by_position_kernel<<<static_cast<unsigned>(a.batch), kThreads, 0, stream_of(l)>>>(a);
  }
}

}  // namespace kvf::exec::cuda::step
