// Times the CUDA prefill kernels (the default, wgmma on an H200, and mma.sync) on the
// issue's shapes (B 1, Hq/Hkv 32/8, D 128, L 4k and 16k, causal; plus non-causal for
// reference) with CUDA events, the median of repeats. TFLOP/s counts 4 * B * Hq * L^2 * D,
// halved for causal. One "key=value" line per shape and kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/attention.h"


int bench_fill_bf16(void* p, size_t n, uint64_t seed);

namespace {


void prefill(int len, bool causal, int reps, kvf::exec::cuda::PrefillKernel kernel) {
  using namespace kvf::exec::cuda;
  const int batch = 1, hq = 32, hkv = 8, d = 128;
  const size_t nq = static_cast<size_t>(len) * hq * d, nk = static_cast<size_t>(len) * hkv * d;
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int32_t* cu = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&q, nq * 2));
  KVF_BENCH_CHECK(cudaMalloc(&k, nk * 2));
  KVF_BENCH_CHECK(cudaMalloc(&v, nk * 2));
  KVF_BENCH_CHECK(cudaMalloc(&out, nq * 2));
  KVF_BENCH_CHECK(cudaMalloc(&cu, 2 * sizeof(int32_t)));
  if (bench_fill_bf16(q, nq, 5) || bench_fill_bf16(k, nk, 6) || bench_fill_bf16(v, nk, 7)) std::exit(1);
  const int32_t cu_h[2] = {0, len};
  KVF_BENCH_CHECK(cudaMemcpy(cu, cu_h, sizeof cu_h, cudaMemcpyHostToDevice));
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
  a.total_q = a.total_k = len;
  a.scale = 0.08838834764831845f;
  a.causal = causal;
  a.kernel = kernel;
  const char* impl = prefill_kernel_for(a) == PrefillKernel::kWgmma ? "kvforge" : "kvforge-mma.sync";
  if (kernel == PrefillKernel::kMmaSync) impl = "kvforge-mma.sync";
  const double t = kvf::bench_cuda::median_event_ms(3, reps, [&](int) {
    const kvf::Status st = prefill_attention(a);
    if (!st.ok()) {
      std::fprintf(stderr, "prefill_attention: %s\n", st.error().message().c_str());
      std::exit(1);
    }
  });
  const double flops = 4.0 * batch * hq * static_cast<double>(len) * len * d / (causal ? 2.0 : 1.0);
  std::printf("prefill impl=%s L=%d causal=%d us=%.1f TFLOPs=%.1f\n", impl, len, causal ? 1 : 0, t * 1e3,
              flops / (t * 1e-3) / 1e12);
  std::fflush(stdout);
  KVF_BENCH_CHECK(cudaFree(q));
  KVF_BENCH_CHECK(cudaFree(k));
  KVF_BENCH_CHECK(cudaFree(v));
  KVF_BENCH_CHECK(cudaFree(out));
  KVF_BENCH_CHECK(cudaFree(cu));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  using kvf::exec::cuda::PrefillKernel;
  for (PrefillKernel k : {PrefillKernel::kAuto, PrefillKernel::kMmaSync})
    for (bool causal : {true, false})
      for (int len : {4096, 16384}) prefill(len, causal, reps, k);
  return 0;
}
