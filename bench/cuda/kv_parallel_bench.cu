// What a context-parallel rank adds to an attention (exec/cuda/step/kv_parallel.cpp), kernel
// by kernel, as the median per launch of a CUDA graph of 20: the local map of the rank's keys
// (kv_shard_map) over a dense cache by position and over a pool shared out by blocks (two
// passes over a row's tiles, with the step's mask), at 4k to 128k keys a row; and the merge of the ranks'
// partials (merge_attention_partials) for one decode row of 32 heads and for 8 of them.
// Usage: bench_cuda_kv_parallel [reps]   (bench/results/cuda/*/run.sh run it on the GPU machine)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/attention.h"
#include "exec/cuda/step/kernels.h"

namespace {

using kvf::bench_cuda::median_graph_ms;
using kvf::exec::cuda::step::KvShardMap;
using kvf::exec::cuda::step::Launch;

template <class T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
  KVF_BENCH_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

// The rank-0-of-2 map of `batch` rows of `stride` live keys each: by position (no map), or
// over a pool whose slots are the keys in order (half of its blocks the rank's), with a mask
// a row as a paged decode has.
double shard_map_us(bool pool, int64_t batch, int64_t stride, int reps) {
  std::vector<int32_t> map(static_cast<size_t>(batch * stride)), lens(static_cast<size_t>(batch), static_cast<int32_t>(stride));
  for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>(i);
  const std::vector<float> mask(static_cast<size_t>(batch * stride), 0.0f);
  int32_t* d_map = device_copy(map);
  int32_t* d_lens = device_copy(lens);
  float* d_mask = device_copy(mask);
  std::vector<int32_t> zeros(static_cast<size_t>(batch * stride + batch), 0);
  int32_t* local = device_copy(zeros);
  float* local_mask = device_copy(mask);
  int32_t* tiles = device_copy(std::vector<int32_t>(static_cast<size_t>(batch * kvf::exec::cuda::step::kv_shard_tiles(stride))));
  KvShardMap a{.map = pool ? d_map : nullptr, .lens = d_lens, .mask = pool ? d_mask : nullptr, .local_map = local,
               .local_lens = local + batch * stride, .local_mask = pool ? local_mask : nullptr, .batch = batch,
               .stride = stride, .block = 16, .mask_batch = pool ? batch : 0, .mask_rows = 1,
               .local_mask_batch = pool ? batch : 0, .pool = pool, .rank = 0, .ranks = 2, .tile_counts = tiles};
  const double ms = median_graph_ms(3, reps, 20, [&](int, cudaStream_t s) {
    kvf::exec::cuda::step::kv_shard_map(a, Launch{s, nullptr, 0, {}});
  });
  for (void* p : {static_cast<void*>(d_map), static_cast<void*>(d_lens), static_cast<void*>(d_mask),
                  static_cast<void*>(local), static_cast<void*>(local_mask), static_cast<void*>(tiles)}) {
    KVF_BENCH_CHECK(cudaFree(p));
  }
  return ms * 1e3;
}

// `parts` ranks' partials of `rows` rows of width 64, side by side as the gather leaves them.
double merge_us(int parts, int rows, int reps) {
  const int64_t dv = 64, part = int64_t{rows} * (dv + 2);
  std::vector<float> host(static_cast<size_t>(parts * part));
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f + static_cast<float>(i % 7) * 0.1f;
  float* d_parts = device_copy(host);
  float* out = device_copy(std::vector<float>(static_cast<size_t>(rows * dv)));
  const kvf::exec::cuda::PartialsMergeArgs args{.parts = parts, .rows = rows, .dv = static_cast<int>(dv), .o = d_parts,
                                                .ml = d_parts + rows * dv, .out = out, .out_ml = nullptr,
                                                .o_stride = part, .ml_stride = part};
  const double ms = median_graph_ms(3, reps, 20, [&](int, cudaStream_t s) {
    if (!kvf::exec::cuda::merge_attention_partials(args, s).ok()) std::exit(1);
  });
  KVF_BENCH_CHECK(cudaFree(d_parts));
  KVF_BENCH_CHECK(cudaFree(out));
  return ms * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::printf("kernel\tform\trows\tkeys a row\tus a launch (rank 0 of 2)\n");
  for (int64_t stride : {int64_t{4096}, int64_t{32768}, int64_t{131072}}) {
    std::printf("kv_shard_map\tby position\t1\t%lld\t%.2f\n", static_cast<long long>(stride), shard_map_us(false, 1, stride, reps));
    for (int64_t batch : {int64_t{1}, int64_t{8}}) {
      std::printf("kv_shard_map\tpool, masked\t%lld\t%lld\t%.2f\n", static_cast<long long>(batch),
                  static_cast<long long>(stride), shard_map_us(true, batch, stride, reps));
    }
  }
  std::printf("kernel\tparts\trows\tdv\tus a launch\n");
  for (int parts : {2, 4}) {
    for (int rows : {32, 256}) std::printf("merge_attention_partials\t%d\t%d\t64\t%.2f\n", parts, rows, merge_us(parts, rows, reps));
  }
  return 0;
}
