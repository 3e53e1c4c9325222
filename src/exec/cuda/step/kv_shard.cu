// kv_shard_map (kernels.h): one block per batch row, its threads over the row's map entries.
// A rank's j-th key is in its (j / block)-th block, which is block (j / block) * ranks + rank
// of the row: every block before the last is whole, so no scan is needed.
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

__global__ void kv_shard_map_kernel(KvShardMap a) {
  const int64_t b = blockIdx.x;
  const int64_t len = min(static_cast<int64_t>(max(a.lens[b], 0)), a.stride);
  const int64_t here = shard_count(len, a.block, a.rank, a.ranks);
  if (threadIdx.x == 0) a.local_lens[b] = static_cast<int32_t>(here);
  for (int64_t j = threadIdx.x; j < a.stride; j += blockDim.x) {
    const int64_t t = ((j / a.block) * a.ranks + a.rank) * a.block + j % a.block;
    int32_t entry = 0;
    if (j < here) entry = a.map != nullptr ? a.map[b * a.stride + t] : static_cast<int32_t>(t);
    a.local_map[b * a.stride + j] = entry;
    // A shared mask is the rank's keys of every row: its entries below the stride, whichever
    // row's length reaches them.
    if (b < a.mask_rows) a.local_mask[b * a.stride + j] = t < a.stride ? a.mask[b * a.stride + t] : -INFINITY;
  }
}

}  // namespace

void kv_shard_map(const KvShardMap& a, const Launch& l) {
  if (a.batch <= 0) return;
  kv_shard_map_kernel<<<static_cast<unsigned>(a.batch), kThreads, 0, stream_of(l)>>>(a);
}

}  // namespace kvf::exec::cuda::step
