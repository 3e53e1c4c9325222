// What the CUDA benchmarks share: a checked CUDA call that ends the program with the call's
// name, and the median time of repeated launches measured with CUDA events (METHOD: warm
// up first, time on the device, take the median).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define KVF_BENCH_CHECK(call)                                                                      \
  do {                                                                                             \
    const cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace kvf::bench_cuda {

// Runs launch(i) for i in [0, warmup + reps), each between two events on the default stream;
// returns the median of the last reps in milliseconds. launch enqueues work; it must not sync.
inline double median_event_ms(int warmup, int reps, const std::function<void(int)>& launch) {
  cudaEvent_t e0, e1;
  KVF_BENCH_CHECK(cudaEventCreate(&e0));
  KVF_BENCH_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    KVF_BENCH_CHECK(cudaEventRecord(e0));
    launch(i);
    KVF_BENCH_CHECK(cudaEventRecord(e1));
    KVF_BENCH_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    KVF_BENCH_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warmup) ms.push_back(t);
  }
  KVF_BENCH_CHECK(cudaGetLastError());
  KVF_BENCH_CHECK(cudaEventDestroy(e0));
  KVF_BENCH_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace kvf::bench_cuda
