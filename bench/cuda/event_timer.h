// What the CUDA benchmarks share: a checked CUDA call that ends the program with the call's
// name, and the median time of repeated launches measured with CUDA events (METHOD: warm
// up first, time on the device, take the median): one launch between two events, or a CUDA
// graph of several back-to-back launches (the time per launch without the host's launch
// latency, which a lone launch between events includes).
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

// Captures launch(i, stream) for i in [0, per_graph) into one CUDA graph, replays it warmup +
// reps times between two events and returns the median replay time divided by per_graph, in
// milliseconds. launch enqueues work on the stream it is given; it must not sync.
inline double median_graph_ms(int warmup, int reps, int per_graph, const std::function<void(int, cudaStream_t)>& launch) {
  cudaStream_t st;
  KVF_BENCH_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  KVF_BENCH_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph; ++i) launch(i, st);
  KVF_BENCH_CHECK(cudaStreamEndCapture(st, &graph));
  KVF_BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  KVF_BENCH_CHECK(cudaEventCreate(&e0));
  KVF_BENCH_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    KVF_BENCH_CHECK(cudaEventRecord(e0, st));
    KVF_BENCH_CHECK(cudaGraphLaunch(exec, st));
    KVF_BENCH_CHECK(cudaEventRecord(e1, st));
    KVF_BENCH_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    KVF_BENCH_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warmup) ms.push_back(t / static_cast<float>(per_graph));
  }
  KVF_BENCH_CHECK(cudaGetLastError());
  KVF_BENCH_CHECK(cudaEventDestroy(e0));
  KVF_BENCH_CHECK(cudaEventDestroy(e1));
  KVF_BENCH_CHECK(cudaGraphExecDestroy(exec));
  KVF_BENCH_CHECK(cudaGraphDestroy(graph));
  KVF_BENCH_CHECK(cudaStreamDestroy(st));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace kvf::bench_cuda
