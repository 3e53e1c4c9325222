// One decode row through TinyLlama-1.1B's 22 layers (f16 weights, 1.9 GB: nothing served
// from L2; an f16 KV cache of `depth` keys a layer), three ways on the same buffers:
//   - the step's kernels: linear_group per product (qkv under its RMSNorm, o + residual,
//     gate/up under its RMSNorm with the SiLU gate, down + residual), rope, the cache write
//     and the split-KV decode attention: a graph of ~8 launches a layer;
//   - persistent_step.cuh's one kernel, registers form and ring form (slots = consumer warps).
// Prints µs per layer and the weights' TB/s (weights and the KV read, over the time) for each,
// and each persistent form's largest difference from the step's kernels over the final
// residual row (random weights, x and cache).
//
// The step's kernels are also timed in parts (the linears alone, with the attention, the
// attention alone); KVF_BENCH_STEP_ONLY=1 stops there, before the persistent forms.
//
//   bench_cuda_layer [depth ...]      (default: 128 32768)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/attention.h"
#include "exec/cuda/step/kernels.h"
#include "persistent_step.cuh"

int bench_fill_f16(void* p, size_t n, uint64_t seed);

namespace {

using namespace persistent_step;
using kvf::DType;
using kvf::exec::cuda::step::LinearGroup;
using kvf::exec::cuda::step::LinearPart;
namespace kc = kvf::exec::cuda;

template <typename T>
T* device_array(size_t n) {
  void* p = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&p, n * sizeof(T)));
  KVF_BENCH_CHECK(cudaMemset(p, 0, n * sizeof(T)));
  return static_cast<T*>(p);
}

void check(const kvf::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error().message().c_str());
    std::exit(1);
  }
}

// The new k and v of the step's qkv (k already rope'd into k_rot) rounded into the caches at pos.
__global__ void write_kv(const float* k_rot, const float* v, __half* k_cache, __half* v_cache, int cap, int pos) {
  for (int i = threadIdx.x; i < kKv; i += blockDim.x) {
    const int64_t at = (static_cast<int64_t>(i / kHeadDim) * cap + pos) * kHeadDim + i % kHeadDim;
    k_cache[at] = __float2half_rn(k_rot[i]);
    v_cache[at] = __float2half_rn(v[i]);
  }
}

struct Model {
  int cap = 0, pos = 0;
  std::vector<LayerWeights> w;
  float *h, *h2, *attn, *qkv, *gated, *norm_w, *h0, *q_rot, *k_rot, *cos, *sin, *partial;
  int32_t* len;
  unsigned* counter;
  void* workspace = nullptr;
  kc::DecodePlan decode_plan;
  std::vector<std::array<LinearGroup, 4>> groups;

  explicit Model(int depth) : cap(depth + 1), pos(depth) {
    uint64_t seed = 1;
    auto random = [&](size_t n) {
      __half* p = device_array<__half>(n);
      KVF_BENCH_CHECK(static_cast<cudaError_t>(bench_fill_f16(p, n, seed++)));
      return p;
    };
    const size_t cache = size_t{kKvHeads} * cap * kHeadDim;
    for (int l = 0; l < kLayers; ++l) {
      w.push_back({random(size_t{kQkv} * kHidden), random(size_t{kHidden} * kHidden), random(size_t{2} * kFfn * kHidden),
                   random(size_t{kHidden} * kFfn), random(cache), random(cache)});
    }
    h = device_array<float>(kHidden), h2 = device_array<float>(kHidden), attn = device_array<float>(kHidden);
    qkv = device_array<float>(kQkv), gated = device_array<float>(kFfn), norm_w = device_array<float>(kHidden);
    h0 = device_array<float>(kHidden), q_rot = device_array<float>(kHidden), k_rot = device_array<float>(kKv);
    cos = device_array<float>(kRot), sin = device_array<float>(kRot);
    partial = device_array<float>(size_t{kKvHeads} * ((cap + 31) / 32) * kRep * kPartial);
    len = device_array<int32_t>(1), counter = device_array<unsigned>(1);
    upload(h0, kHidden, [](int i) { return std::sin(0.37f * static_cast<float>(i)); });
    upload(norm_w, kHidden, [](int i) { return 1.0f + 0.1f * std::sin(static_cast<float>(i)); });
    upload(cos, kRot, [&](int i) { return std::cos(static_cast<float>(pos) * std::pow(10000.0f, -i / 32.0f)); });
    upload(sin, kRot, [&](int i) { return std::sin(static_cast<float>(pos) * std::pow(10000.0f, -i / 32.0f)); });
    const int32_t live = pos + 1;
    KVF_BENCH_CHECK(cudaMemcpy(len, &live, 4, cudaMemcpyHostToDevice));
    make_groups();
    kc::DecodeAttentionArgs d = decode_args(0);
    kvf::Result<kc::DecodePlan> plan = kc::plan_decode_attention(d);
    check(plan.ok() ? kvf::Status{} : plan.take_error());
    decode_plan = *plan;
    KVF_BENCH_CHECK(cudaMalloc(&workspace, std::max<size_t>(decode_plan.workspace_bytes, 16)));
    check(kc::prepare_decode_workspace(decode_plan, workspace));
  }

  template <typename F>
  static void upload(float* dst, int n, F f) {
    std::vector<float> host(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) host[static_cast<size_t>(i)] = f(i);
    KVF_BENCH_CHECK(cudaMemcpy(dst, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  }

  // Small scores: weights in [-1, 1) give |q|, |k| near 26, so 1/√64 would make every softmax
  // one-hot and the comparison brittle.
  static constexpr float kScale = 2e-4f;

  kc::DecodeAttentionArgs decode_args(int layer) const {
    kc::DecodeAttentionArgs d;
    d.kv_type = kc::KvType::kF16;
    d.q_heads = kHeads, d.kv_heads = kKvHeads, d.dk = d.dv = kHeadDim;
    d.q = q_rot, d.k = w[static_cast<size_t>(layer)].k_cache, d.v = w[static_cast<size_t>(layer)].v_cache;
    d.capacity = cap, d.lens = len, d.max_len = cap, d.scale = kScale, d.out = attn;
    return d;
  }

  // x · w [n, k] added to `residual` into `out`.
  static LinearGroup residual_group(const __half* w, int n, const float* residual, float* out) {
    LinearGroup g;
    g.part[0] = LinearPart{w, nullptr, n, nullptr};
    g.residual = residual;
    g.residual_out = out;
    return g;
  }

  void make_groups() {
    for (const LayerWeights& L : w) {
      LinearGroup qkv_g;
      qkv_g.parts = 3;
      qkv_g.part[0] = LinearPart{L.qkv, nullptr, kHidden, qkv};
      qkv_g.part[1] = LinearPart{L.qkv + size_t{kHidden} * kHidden, nullptr, kKv, qkv + kHidden};
      qkv_g.part[2] = LinearPart{L.qkv + size_t{kHidden + kKv} * kHidden, nullptr, kKv, qkv + kHidden + kKv};
      qkv_g.norm_w = norm_w;
      qkv_g.norm_eps = 1e-5;
      LinearGroup gu_g;
      gu_g.parts = 2;
      gu_g.part[0] = LinearPart{L.gate_up, nullptr, kFfn, nullptr};
      gu_g.part[1] = LinearPart{L.gate_up + size_t{kFfn} * kHidden, nullptr, kFfn, nullptr};
      gu_g.glu = true;
      gu_g.glu_out = gated;
      gu_g.norm_w = norm_w;
      gu_g.norm_eps = 1e-5;
      groups.push_back({qkv_g, residual_group(L.o, kHidden, h, h2), gu_g, residual_group(L.down, kHidden, h2, h)});
    }
  }

  // Which of a layer's kernels step_kernels enqueues: the whole step, or a part of it to
  // see what each part costs inside the chain of launches.
  enum class Parts { kAll, kLinears, kLinearsAndAttention, kAttention };

  void step_kernels(cudaStream_t s, Parts parts = Parts::kAll) const {
    const kvf::exec::cuda::step::Launch l{s, nullptr, 0, {}};
    const float* in[4] = {h, attn, h2, gated};
    const int64_t k[4] = {kHidden, kHidden, kHidden, kFfn};
    const bool linears = parts != Parts::kAttention, attention = parts != Parts::kLinears;
    for (size_t layer = 0; layer < groups.size(); ++layer) {
      if (linears) kvf::exec::cuda::step::linear_group(in[0], 1, k[0], DType::kF16, groups[layer][0], l);
      if (parts == Parts::kAll) {
        kvf::exec::cuda::step::rope({qkv, cos, sin, q_rot, kHeads, kHeadDim, 1, 1, kHeadDim, false}, l);
        kvf::exec::cuda::step::rope({qkv + kHidden, cos, sin, k_rot, kKvHeads, kHeadDim, 1, 1, kHeadDim, false}, l);
        write_kv<<<1, kKv, 0, s>>>(k_rot, qkv + kHidden + kKv, w[layer].k_cache, w[layer].v_cache, cap, pos);
      }
      if (attention) check(kc::decode_attention(decode_args(static_cast<int>(layer)), decode_plan, workspace, s));
      if (!linears) continue;
      for (int i = 1; i < 4; ++i) kvf::exec::cuda::step::linear_group(in[i], 1, k[i], DType::kF16, groups[layer][i], l);
    }
  }

  Args args(int chunk, int prefetch_bytes) const {
    Args a{};
    for (int l = 0; l < kLayers; ++l) a.layer[l] = w[static_cast<size_t>(l)];
    a.h = h, a.h2 = h2, a.attn = attn, a.qkv = qkv, a.gated = gated, a.partial = partial;
    a.norm_w = norm_w, a.eps = 1e-5f, a.cos = cos, a.sin = sin;
    a.cap = cap, a.pos = pos, a.chunk = chunk, a.chunks = (pos + chunk) / chunk, a.scale = kScale;
    a.counter = counter, a.prefetch_bytes = prefetch_bytes;
    return a;
  }

  // slots 0: the registers form; else the ring form with that many consumer warps.
  void persistent(cudaStream_t s, int blocks, int chunk, int slots) const {
    KVF_BENCH_CHECK(cudaMemsetAsync(counter, 0, 4, s));
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.stream = s;
    if (slots == 0) {
      cfg.blockDim = dim3(registers::kThreads);
      KVF_BENCH_CHECK(cudaLaunchKernelEx(&cfg, registers::step, args(chunk, 32 << 10)));
      return;
    }
    cfg.blockDim = dim3(ring::kConsumers + 32);
    cfg.dynamicSmemBytes = ring::shared_bytes(slots);
    KVF_BENCH_CHECK(cudaLaunchKernelEx(&cfg, ring::step, args(chunk, 0), slots));
  }

  // The final residual after one step (h reset first); slots -1: the step's kernels.
  std::vector<float> final_h(int blocks, int chunk, int slots) const {
    KVF_BENCH_CHECK(cudaMemcpy(h, h0, kHidden * 4, cudaMemcpyDeviceToDevice));
    if (slots < 0) step_kernels(nullptr);
    else persistent(nullptr, blocks, chunk, slots);
    KVF_BENCH_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(kHidden);
    KVF_BENCH_CHECK(cudaMemcpy(out.data(), h, kHidden * 4, cudaMemcpyDeviceToHost));
    return out;
  }
};

double us_per_layer(const std::function<void(cudaStream_t)>& enqueue) {
  return 1e3 * kvf::bench_cuda::median_graph_ms(3, 15, 1, [&](int, cudaStream_t st) { enqueue(st); }) / kLayers;
}

double relative_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

void run_depth(int depth, int sms) {
  Model md(depth);
  const double mb_layer = (2.0 * (static_cast<double>(kQkv) * kHidden + 1.0 * kHidden * kHidden +
                                  2.0 * kFfn * kHidden + 1.0 * kHidden * kFfn) +
                           2.0 * 2 * kKvHeads * (depth + 1.0) * kHeadDim) / 1e6;
  std::printf("== depth %d: TinyLlama-1.1B decode row, f16 weights and KV, %.1f MB a layer, %d layers a graph\n", depth,
              mb_layer, kLayers);
  const std::vector<float> want = md.final_h(sms, 0, -1);
  const auto report = [&](const std::string& name, double us) {
    std::printf("%-44s %8.2f us/layer %6.2f TB/s\n", name.c_str(), us, mb_layer / us);
  };
  report("step kernels (linear_group, decode_attention)", us_per_layer([&](cudaStream_t s) { md.step_kernels(s); }));
  using P = Model::Parts;
  report("  the four linear groups alone", us_per_layer([&](cudaStream_t s) { md.step_kernels(s, P::kLinears); }));
  report("  the linear groups and the attention", us_per_layer([&](cudaStream_t s) { md.step_kernels(s, P::kLinearsAndAttention); }));
  report("  the attention alone", us_per_layer([&](cudaStream_t s) { md.step_kernels(s, P::kAttention); }));
  if (std::getenv("KVF_BENCH_STEP_ONLY") != nullptr) return;
  std::vector<int> chunks = depth < 1024 ? std::vector<int>{32, 64, depth + 1} : std::vector<int>{128, 256, 512};
  for (int slots : {0, 8, 12}) {
    for (int chunk : chunks) {
      const double diff = relative_diff(md.final_h(sms, chunk, slots), want);
      char name[96];
      std::snprintf(name, sizeof(name), "%s, chunk %d (diff %.1e)", slots == 0 ? "registers" : (slots == 8 ? "ring 8" : "ring 12"),
                    chunk, diff);
      report(name, us_per_layer([&](cudaStream_t s) { md.persistent(s, sms, chunk, slots); }));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int sms = 0, per_sm = 0;
  KVF_BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The grid barrier needs every block resident at once: one a SM, on an otherwise idle GPU.
  KVF_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, registers::step, registers::kThreads, 0));
  const int max_slots = ring::kWarps;
  KVF_BENCH_CHECK(cudaFuncSetAttribute(ring::step, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(ring::shared_bytes(max_slots))));
  int ring_per_sm = 0;
  KVF_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ring_per_sm, ring::step, ring::kConsumers + 32,
                                                                ring::shared_bytes(max_slots)));
  if (per_sm < 1 || ring_per_sm < 1) {
    std::fprintf(stderr, "a persistent step does not fit on a SM (%d, %d)\n", per_sm, ring_per_sm);
    return 1;
  }
  std::vector<int> depths;
  for (int i = 1; i < argc; ++i) depths.push_back(std::atoi(argv[i]));
  if (depths.empty()) depths = {128, 32768};
  for (int depth : depths) run_depth(depth, sms);
  return 0;
}
