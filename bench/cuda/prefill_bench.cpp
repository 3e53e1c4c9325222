// Times the CUDA prefill kernel on the shapes (B 1, Hq/Hkv 32/8, D 128, L 4k and
// 16k, causal; plus non-causal for reference) with CUDA events, the median of repeats.
// TFLOP/s counts 4 * B * Hq * L^2 * D, halved for causal. One "key=value" line per shape.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exec/cuda/attention.h"

int bench_fill_bf16(void* p, size_t n, uint64_t seed);

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    const cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

void prefill(int len, bool causal, int reps) {
  using namespace kvf::exec::cuda;
  const int batch = 1, hq = 32, hkv = 8, d = 128;
  const size_t nq = static_cast<size_t>(len) * hq * d, nk = static_cast<size_t>(len) * hkv * d;
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int32_t* cu = nullptr;
  CHECK(cudaMalloc(&q, nq * 2));
  CHECK(cudaMalloc(&k, nk * 2));
  CHECK(cudaMalloc(&v, nk * 2));
  CHECK(cudaMalloc(&out, nq * 2));
  CHECK(cudaMalloc(&cu, 2 * sizeof(int32_t)));
  if (bench_fill_bf16(q, nq, 5) || bench_fill_bf16(k, nk, 6) || bench_fill_bf16(v, nk, 7)) std::exit(1);
  const int32_t cu_h[2] = {0, len};
  CHECK(cudaMemcpy(cu, cu_h, sizeof cu_h, cudaMemcpyHostToDevice));
  PrefillAttentionArgs a;
  a.batch = batch;
  a.q_heads = hq;
  a.kv_heads = hkv;
  a.head_dim = d;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.cu_seqlens_q = a.cu_seqlens_k = cu;
  a.max_seqlen_q = len;
  a.scale = 0.08838834764831845f;
  a.causal = causal;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    CHECK(cudaEventRecord(e0));
    const kvf::Status st = prefill_attention(a);
    if (!st.ok()) {
      std::fprintf(stderr, "prefill_attention: %s\n", st.error().message().c_str());
      std::exit(1);
    }
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double t = ms[ms.size() / 2];
  const double flops = 4.0 * batch * hq * static_cast<double>(len) * len * d / (causal ? 2.0 : 1.0);
  std::printf("prefill impl=kvforge L=%d causal=%d us=%.1f TFLOPs=%.1f\n", len, causal ? 1 : 0, t * 1e3,
              flops / (t * 1e-3) / 1e12);
  std::fflush(stdout);
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaFree(q));
  CHECK(cudaFree(k));
  CHECK(cudaFree(v));
  CHECK(cudaFree(out));
  CHECK(cudaFree(cu));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  for (bool causal : {true, false})
    for (int len : {4096, 16384}) prefill(len, causal, reps);
  return 0;
}
