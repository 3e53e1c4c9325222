// Times the CUDA decode kernels on the standard shapes (B 1/8/32, Hq/Hkv 32/8, D 128, context
// 8k/32k/128k), dense and paged (shuffled 16-token pages), on the tensor cores and on the SIMT
// kernel, and the device-to-device copy bandwidth; "tinyllama" instead sweeps the key splits
// of TinyLlama's one-row decode (Hq/Hkv 32/4, D 64, f16 K/V) at 8k and 32k keys. Each time is
// the median over repeats of a CUDA graph of back-to-back decodes divided by their count (what
// a decode step replayed from a graph costs; us_launch, one launch between two events, adds
// the host's launch latency), rotating input sets so each launch reads at least 4x the L2 from
// memory. Effective TB/s counts the unique K/V bytes (2 * B * Hkv * ctx * D * 2). One line per
// measurement, "key=value" words, for run.sh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/attention.h"


int bench_fill_bf16(void* p, size_t n, uint64_t seed);

namespace {


void copy_bandwidth() {
  const size_t bytes = size_t{4} << 30;
  void *a = nullptr, *b = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&a, bytes));
  KVF_BENCH_CHECK(cudaMalloc(&b, bytes));
  KVF_BENCH_CHECK(cudaMemset(a, 1, bytes));
  const double t = kvf::bench_cuda::median_event_ms(
      3, 10, [&](int) { KVF_BENCH_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  std::printf("copy bytes=%zu ms=%.4f TBps=%.3f\n", 2 * bytes, t, 2.0 * bytes / (t * 1e-3) / 1e12);
  KVF_BENCH_CHECK(cudaFree(a));
  KVF_BENCH_CHECK(cudaFree(b));
}

// What a decode reads besides its batch and context: heads, head size, K/V type, and the
// step's way of chunking (step: the plan made for a cache of `ctx + 128` keys, each row's
// chunks from its length) or the plan's own for ctx.
struct DecodeShape {
  int hq = 32, hkv = 8, d = 128;
  bool f16 = false;
  bool step = false;
};

void decode(int batch, int ctx, bool paged, int reps, kvf::exec::cuda::DecodeKernel kernel, int force_splits = 0,
            DecodeShape shape = {}) {
  using namespace kvf::exec::cuda;
  const int hq = shape.hq, hkv = shape.hkv, d = shape.d;
  const int cap = shape.step ? ctx + 128 : ctx;
  const size_t elems = static_cast<size_t>(batch) * hkv * cap * d;  // per K (and per V)
  const size_t kv_bytes = 2 * static_cast<size_t>(batch) * hkv * ctx * d * 2;  // the bytes read
  const size_t l2x4 = size_t{240} << 20;
  const int sets = static_cast<int>(std::max<size_t>(1, (l2x4 + kv_bytes - 1) / kv_bytes));
  std::vector<void*> ks(sets), vs(sets);
  for (int s = 0; s < sets; ++s) {
    KVF_BENCH_CHECK(cudaMalloc(&ks[s], elems * 2));
    KVF_BENCH_CHECK(cudaMalloc(&vs[s], elems * 2));
    if (bench_fill_bf16(ks[s], elems, 11 + s) != 0 || bench_fill_bf16(vs[s], elems, 977 + s) != 0) std::exit(1);
  }
  float *q = nullptr, *out = nullptr;
  int32_t *lens = nullptr, *map = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&q, sizeof(float) * batch * hq * d));
  KVF_BENCH_CHECK(cudaMalloc(&out, sizeof(float) * batch * hq * d));
  KVF_BENCH_CHECK(cudaMalloc(&lens, sizeof(int32_t) * batch));
  std::vector<float> hqv(static_cast<size_t>(batch) * hq * d);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (float& x : hqv) x = uni(rng);
  KVF_BENCH_CHECK(cudaMemcpy(q, hqv.data(), hqv.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> hl(batch, ctx);
  KVF_BENCH_CHECK(cudaMemcpy(lens, hl.data(), hl.size() * 4, cudaMemcpyHostToDevice));
  if (paged) {
    // The same bytes as a pool [B * ctx, Hkv, D] of 16-token pages, shuffled.
    const int pages = batch * ctx / 16;
    std::vector<int> order(pages);
    std::iota(order.begin(), order.end(), 0);
    // KVF_BENCH_SHUFFLE_PAGES=n shuffles within runs of n pages only (0 or unset: all).
    const char* sw = std::getenv("KVF_BENCH_SHUFFLE_PAGES");
    const int run = sw ? std::atoi(sw) : 0;
    for (int at = 0; at < pages; at += run > 0 ? run : pages)
      std::shuffle(order.begin() + at, order.begin() + std::min(pages, at + (run > 0 ? run : pages)), rng);
    std::vector<int32_t> hm(static_cast<size_t>(batch) * ctx);
    for (int b = 0; b < batch; ++b)
      for (int t = 0; t < ctx; ++t) hm[static_cast<size_t>(b) * ctx + t] = order[b * (ctx / 16) + t / 16] * 16 + t % 16;
    KVF_BENCH_CHECK(cudaMalloc(&map, hm.size() * 4));
    KVF_BENCH_CHECK(cudaMemcpy(map, hm.data(), hm.size() * 4, cudaMemcpyHostToDevice));
  }
  DecodeAttentionArgs a;
  a.batch = batch;
  a.q_heads = hq;
  a.kv_heads = hkv;
  a.dk = a.dv = d;
  a.q = q;
  a.k = ks[0];
  a.v = vs[0];
  a.capacity = paged ? 0 : cap;
  a.read_map = map;
  a.map_stride = paged ? ctx : 0;
  a.lens = lens;
  a.max_len = shape.step ? cap : ctx;
  a.chunks_from_lens = shape.step;
  a.kv_type = shape.f16 ? KvType::kF16 : a.kv_type;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.out = out;
  a.num_splits = force_splits;
  a.kernel = kernel;
  kvf::Result<DecodePlan> plan = plan_decode_attention(a);
  if (!plan.ok()) {
    std::fprintf(stderr, "plan: %s\n", plan.error().to_string().c_str());
    std::exit(1);
  }
  void* ws = nullptr;
  if (plan.value().workspace_bytes) {
    KVF_BENCH_CHECK(cudaMalloc(&ws, plan.value().workspace_bytes));
    if (!prepare_decode_workspace(plan.value(), ws).ok()) std::exit(1);
  }
  auto launch = [&](int i, cudaStream_t stream) {
    a.k = ks[i % sets];
    a.v = vs[i % sets];
    kvf::Status st = decode_attention(a, plan.value(), ws, stream);
    if (!st.ok()) {
      std::fprintf(stderr, "decode: %s\n", st.error().to_string().c_str());
      std::exit(1);
    }
  };
  const double t1 = kvf::bench_cuda::median_event_ms(3, reps, [&](int i) { launch(i, nullptr); });
  // Enough launches per graph to cycle the sets and to make a replay >= ~2 ms.
  const int per_graph = std::max(sets, std::min(64, static_cast<int>(2e-3 / (t1 * 1e-3)) + 1));
  const double t = kvf::bench_cuda::median_graph_ms(2, reps, per_graph, launch);
  const bool tc = plan.value().tensor_cores;
  std::printf("decode impl=%s B=%d hkv=%d d=%d ctx=%d layout=%s%s splits=%d chunk=%d us=%.2f TBps=%.3f us_launch=%.2f sets=%d graph=%d\n",
              tc ? "kvforge" : "kvforge-simt", batch, hkv, d, ctx,
              force_splits ? (paged ? "paged-forced" : "dense-forced") : (paged ? "paged" : "dense"), shape.step ? "-step" : "",
              plan.value().splits, plan.value().chunk, t * 1e3, kv_bytes / (t * 1e-3) / 1e12, t1 * 1e3, sets, per_graph);
  std::fflush(stdout);
  for (int s = 0; s < sets; ++s) {
    KVF_BENCH_CHECK(cudaFree(ks[s]));
    KVF_BENCH_CHECK(cudaFree(vs[s]));
  }
  KVF_BENCH_CHECK(cudaFree(q));
  KVF_BENCH_CHECK(cudaFree(out));
  KVF_BENCH_CHECK(cudaFree(lens));
  if (map) KVF_BENCH_CHECK(cudaFree(map));
  if (ws) KVF_BENCH_CHECK(cudaFree(ws));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  cudaDeviceProp prop;
  KVF_BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device name=\"%s\" sms=%d l2=%d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize);
  using kvf::exec::cuda::DecodeKernel;
  const DecodeKernel tc = DecodeKernel::kTensorCores, simt = DecodeKernel::kSimt;
  const DecodeShape tiny{.hq = 32, .hkv = 4, .d = 64, .f16 = true, .step = true};
  if (argc > 5 && std::string(argv[2]) == "shape") {  // one shape: B ctx paged(0/1) [splits [tinyllama]], for ncu
    const bool tiny_heads = argc > 7 && std::string(argv[7]) == "tinyllama";
    decode(std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]) != 0, reps, tc, argc > 6 ? std::atoi(argv[6]) : 0,
           tiny_heads ? tiny : DecodeShape{});
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "tinyllama") {  // one row, the step's chunking, splits 1..64
    for (int ctx : {8192, 32768}) {
      decode(1, ctx, false, reps, tc, 0, tiny);
      for (int splits : {4, 8, 12, 16, 22, 24, 29, 32, 33, 48, 64}) decode(1, ctx, false, reps, tc, splits, tiny);
    }
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "quick") {  // the variants' shapes: B = 1 at every context, a few more
    const int shapes[][2] = {{1, 8192}, {1, 32768}, {1, 131072}, {8, 8192}, {8, 32768}, {32, 32768}};
    for (const auto& s : shapes)
      for (bool paged : {false, true}) decode(s[0], s[1], paged, reps, tc);
    return 0;
  }
  const bool sweep_only = argc > 2 && std::string(argv[2]) == "sweep";
  if (!sweep_only) {
    copy_bandwidth();
    for (DecodeKernel k : {tc, simt})
      for (int batch : {1, 8, 32})
        for (int ctx : {8192, 32768, 131072})
          for (bool paged : {false, true}) decode(batch, ctx, paged, reps, k);
  }
  // Split-count sweep of the tensor-core kernel (layout=*-forced lines; the table lists them
  // apart). "sweep" as the second argument runs only this.
  if (const char* sw = std::getenv("KVF_BENCH_SWEEP"); sweep_only || (sw && sw[0] == '1')) {
    for (bool paged : {false, true}) {
      for (int splits : {8, 16, 24, 32, 48}) decode(1, 8192, paged, reps, tc, splits);
      for (int splits : {16, 24, 32, 48}) decode(1, 32768, paged, reps, tc, splits);
      for (int splits : {16, 24, 32, 48, 64}) decode(1, 131072, paged, reps, tc, splits);
      for (int splits : {1, 2, 3, 4, 6, 8}) decode(8, 32768, paged, reps, tc, splits);
    }
  }
  return 0;
}
