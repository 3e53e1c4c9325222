// Times the CUDA prefill kernels (the default, wgmma on an H200, and mma.sync) on the
// standard shapes (B 1, Hq/Hkv 32/8, D 128, L 4k and 16k, causal; plus non-causal for
// reference) with CUDA events, the median of repeats. TFLOP/s counts 4 * Hq * L^2 * D per
// sequence, halved for causal. One "key=value" line per shape and kernel. "extra" as the
// second argument times what the standard table leaves out instead: f16, head dims 64 and
// 256, and a varlen batch of mixed lengths.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/attention.h"


int bench_fill_bf16(void* p, size_t n, uint64_t seed);
int bench_fill_f16(void* p, size_t n, uint64_t seed);

namespace {


struct Shape {
  std::vector<int> lens = {4096};  // one sequence per entry, packed (queries = keys)
  int head_dim = 128;
  kvf::exec::cuda::KvType type = kvf::exec::cuda::KvType::kBF16;
  bool causal = true;
  const char* tag = "";  // appended to impl for the shapes beyond the standard table
};

void prefill(const Shape& sh, int reps, kvf::exec::cuda::PrefillKernel kernel) {
  using namespace kvf::exec::cuda;
  const int batch = static_cast<int>(sh.lens.size()), hq = 32, hkv = 8, d = sh.head_dim;
  std::vector<int32_t> cu_h(1, 0);
  double flops = 0.0;
  for (int len : sh.lens) {
    cu_h.push_back(cu_h.back() + len);
    flops += 4.0 * hq * static_cast<double>(len) * len * d / (sh.causal ? 2.0 : 1.0);
  }
  const int total = cu_h.back(), longest = *std::max_element(sh.lens.begin(), sh.lens.end());
  const size_t nq = static_cast<size_t>(total) * hq * d, nk = static_cast<size_t>(total) * hkv * d;
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  int32_t* cu = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&q, nq * 2));
  KVF_BENCH_CHECK(cudaMalloc(&k, nk * 2));
  KVF_BENCH_CHECK(cudaMalloc(&v, nk * 2));
  KVF_BENCH_CHECK(cudaMalloc(&out, nq * 2));
  KVF_BENCH_CHECK(cudaMalloc(&cu, cu_h.size() * sizeof(int32_t)));
  auto fill = sh.type == KvType::kF16 ? bench_fill_f16 : bench_fill_bf16;
  if (fill(q, nq, 5) || fill(k, nk, 6) || fill(v, nk, 7)) std::exit(1);
  KVF_BENCH_CHECK(cudaMemcpy(cu, cu_h.data(), cu_h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  PrefillAttentionArgs a;
  a.kv_type = sh.type;
  a.batch = batch;
  a.q_heads = hq;
  a.kv_heads = hkv;
  a.head_dim = d;
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.cu_seqlens_q = a.cu_seqlens_k = cu;
  a.max_seqlen_q = longest;
  a.total_q = a.total_k = total;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.causal = sh.causal;
  a.kernel = kernel;
  if (const kvf::Status ok = check_prefill_attention(a); !ok.ok()) {
    std::fprintf(stderr, "prefill_attention: %s\n", ok.error().message().c_str());
    std::exit(1);
  }
  const std::string impl = std::string(prefill_kernel_for(a) == PrefillKernel::kWgmma ? "kvforge" : "kvforge-mma.sync") + sh.tag;
  const double t = kvf::bench_cuda::median_event_ms(3, reps, [&](int) {
    const kvf::Status st = prefill_attention(a);
    if (!st.ok()) {
      std::fprintf(stderr, "prefill_attention: %s\n", st.error().message().c_str());
      std::exit(1);
    }
  });
  std::printf("prefill impl=%s L=%d causal=%d B=%d D=%d dtype=%s us=%.1f TFLOPs=%.1f\n", impl.c_str(), total,
              sh.causal ? 1 : 0, batch, d, sh.type == KvType::kF16 ? "f16" : "bf16", t * 1e3, flops / (t * 1e-3) / 1e12);
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
  using kvf::exec::cuda::KvType;
  using kvf::exec::cuda::PrefillKernel;
  if (argc > 2 && std::string(argv[2]) == "extra") {
    Shape f16{{16384}, 128, KvType::kF16, true, "-f16"};
    Shape d64{{16384}, 64, KvType::kBF16, true, "-d64"};
    Shape d256{{16384}, 256, KvType::kBF16, true, "-d256"};
    // 16k tokens in 8 sequences of mixed lengths, as a continuous-batching prefill step.
    // torch_peer.py's VARLEN times the same batch on flash.
    Shape varlen{{512, 3584, 1024, 3072, 1536, 2560, 2048, 2048}, 128, KvType::kBF16, true, "-varlen"};
    for (const Shape& sh : {f16, d64, d256, varlen}) prefill(sh, reps, PrefillKernel::kAuto);
    for (const Shape& sh : {d64, d256}) prefill(sh, reps, PrefillKernel::kMmaSync);
    return 0;
  }
  for (PrefillKernel k : {PrefillKernel::kAuto, PrefillKernel::kMmaSync})
    for (bool causal : {true, false})
      for (int len : {4096, 16384}) prefill(Shape{{len}, 128, KvType::kBF16, causal, ""}, reps, k);
  return 0;
}
