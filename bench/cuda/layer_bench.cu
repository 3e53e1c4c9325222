// One decode row through the linears of TinyLlama-1.1B's 22 layers (f16 weights, 1.9 GB:
// nothing served from L2), two ways on the same buffers:
//   - the step's kernels: linear_group per product (qkv under its RMSNorm, o + residual,
//     gate/up under its RMSNorm with the SiLU gate, down + residual), 88 launches in a graph;
//   - one persistent kernel: a block resident on every SM walks the same 88 stages, a
//     grid-wide counter between stages in place of a kernel boundary, and before it waits on
//     that counter each block asks L2 for the head of its slice of the next stage's weights
//     (cp.async.bulk.prefetch.L2): the weights never depend on the activations, so the memory
//     pipe need not drain at a dependency.
// Prints µs per layer and the weights' TB/s for each, and the persistent kernel's largest
// difference from the step's kernels over the final residual row (random weights and x).
// A prototype: the step adopts the form only if it beats the separate kernels here.
//
//   bench_cuda_layer
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/step/kernels.h"

int bench_fill_f16(void* p, size_t n, uint64_t seed);

namespace {

using kvf::DType;
using kvf::exec::cuda::step::LinearGroup;
using kvf::exec::cuda::step::LinearPart;

constexpr int kLayers = 22, kHidden = 2048, kKv = 256, kQkv = kHidden + 2 * kKv, kFfn = 5632;
constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kInFlight = 8;  // 16-byte loads of a row a lane issues before it uses any

template <typename T>
T* device_array(size_t n) {
  void* p = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&p, n * sizeof(T)));
  KVF_BENCH_CHECK(cudaMemset(p, 0, n * sizeof(T)));
  return static_cast<T*>(p);
}

// A layer's weights, each product one allocation: qkv [2560, 2048] (q, k, v rows in turn),
// gate/up [2 * 5632, 2048] (gate rows, then up rows), o [2048, 2048], down [2048, 5632].
struct LayerWeights {
  const __half *qkv, *o, *gate_up, *down;
};

struct Args {
  LayerWeights layer[kLayers];
  float *h, *h2, *attn, *qkv, *gated;
  const float* norm_w;
  float eps;
  unsigned* counter;
  int prefetch_bytes;  // of a block's next slice, asked of L2 before each wait
};

// One stage: out[c] = (residual[c] +) w[c] · x' over columns c, x' = x or its RMSNorm; with
// glu, out[c] = silu(w[c] · x') * (w[n + c] · x').
struct Stage {
  const __half* w;
  int n, k;
  const float* x;
  bool norm, glu;
  const float* residual;
  float* out;
};

__device__ Stage stage_of(const Args& a, int index) {
  const LayerWeights& L = a.layer[index / 4];
  switch (index % 4) {
    case 0: return {L.qkv, kQkv, kHidden, a.h, true, false, nullptr, a.qkv};
    case 1: return {L.o, kHidden, kHidden, a.attn, false, false, a.h, a.h2};
    case 2: return {L.gate_up, kFfn, kHidden, a.h2, true, true, nullptr, a.gated};
    default: return {L.down, kHidden, kFfn, a.gated, false, false, a.h2, a.h};
  }
}

__device__ int slice_begin(int n) { return static_cast<int>(static_cast<int64_t>(n) * blockIdx.x / gridDim.x); }
__device__ int slice_end(int n) { return static_cast<int>(static_cast<int64_t>(n) * (blockIdx.x + 1) / gridDim.x); }

__device__ void prefetch_l2(const void* p, int bytes) {
  bytes &= ~15;
  if (bytes > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// The first `bytes` of this block's rows of stage s (split between gate and up rows).
__device__ void prefetch_slice(const Stage& s, int bytes) {
  if (threadIdx.x != 0 || bytes <= 0) return;
  const int c0 = slice_begin(s.n), c1 = slice_end(s.n);
  const int64_t have = static_cast<int64_t>(c1 - c0) * s.k * 2;
  if (!s.glu) {
    prefetch_l2(s.w + static_cast<int64_t>(c0) * s.k, static_cast<int>(min(have, static_cast<int64_t>(bytes))));
    return;
  }
  const int half = static_cast<int>(min(have, static_cast<int64_t>(bytes / 2)));
  prefetch_l2(s.w + static_cast<int64_t>(c0) * s.k, half);
  prefetch_l2(s.w + static_cast<int64_t>(s.n + c0) * s.k, half);
}

// Every block arrives; thread 0 waits until all have (target = blocks x barriers so far).
// The fence before the arrival publishes the block's stores (cumulative over the block's
// barrier); the acquire load orders the block's later loads after everyone's.
__device__ void grid_barrier(unsigned* counter, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

// xs = x, or x's RMSNorm; activations are read through L2 (__ldcg): other SMs wrote them.
__device__ void load_x(const Stage& s, const float* norm_w, float eps, float* xs, float* red) {
  float ss = 0;
  for (int i = threadIdx.x; i < s.k; i += kThreads) {
    const float v = __ldcg(s.x + i);
    xs[i] = v;
    ss += v * v;
  }
  if (!s.norm) {
    __syncthreads();
    return;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kWarps; ++w) total += red[w];
  const float inv = rsqrtf(total / static_cast<float>(s.k) + eps);
  for (int i = threadIdx.x; i < s.k; i += kThreads) xs[i] = xs[i] * inv * norm_w[i];
  __syncthreads();
}

// Sums of R weight rows against xs, in every lane: each lane's loads of all R rows issued
// before any is used, kInFlight 16-byte vectors a row at a time.
template <int R>
__device__ void dot_rows(const __half* const (&rows)[R], const bool (&live)[R], int k, const float* xs, float (&acc)[R]) {
  const int lane = threadIdx.x % 32, vecs = k / 8;
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0;
  for (int v0 = 0; v0 < vecs; v0 += 32 * kInFlight) {
    uint4 buf[R][kInFlight];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int g = 0; g < kInFlight; ++g) {
        const int v = v0 + g * 32 + lane;
        buf[r][g] = live[r] && v < vecs ? __ldg(reinterpret_cast<const uint4*>(rows[r]) + v) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int g = 0; g < kInFlight; ++g) {
      const int v = v0 + g * 32 + lane;
      if (v >= vecs) break;
      const float4 xa = *reinterpret_cast<const float4*>(xs + 8 * v), xb = *reinterpret_cast<const float4*>(xs + 8 * v + 4);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const __half2* h = reinterpret_cast<const __half2*>(&buf[r][g]);
        const float2 w0 = __half22float2(h[0]), w1 = __half22float2(h[1]), w2 = __half22float2(h[2]),
                     w3 = __half22float2(h[3]);
        acc[r] += w0.x * xa.x + w0.y * xa.y + w1.x * xa.z + w1.y * xa.w + w2.x * xb.x + w2.y * xb.y + w3.x * xb.z +
                  w3.y * xb.w;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
}

// The block's slice of a stage, two weight rows a warp at a time: two columns, or one
// column's gate and up rows.
__device__ void run_stage(const Stage& s, const float* xs) {
  const int c0 = slice_begin(s.n), c1 = slice_end(s.n), warp = threadIdx.x / 32, step = s.glu ? 1 : 2;
  for (int c = c0 + warp * step; c < c1; c += kWarps * step) {
    const bool second = s.glu || c + 1 < c1;
    const __half* rows[2] = {s.w + static_cast<int64_t>(c) * s.k,
                             s.w + static_cast<int64_t>(s.glu ? s.n + c : min(c + 1, c1 - 1)) * s.k};
    const bool live[2] = {true, second};
    float acc[2];
    dot_rows<2>(rows, live, s.k, xs, acc);
    if (threadIdx.x % 32 != 0) continue;
    if (s.glu) {
      s.out[c] = acc[0] / (1.0f + expf(-acc[0])) * acc[1];
      continue;
    }
    for (int i = 0; i < (second ? 2 : 1); ++i) {
      s.out[c + i] = acc[i] + (s.residual != nullptr ? __ldcg(s.residual + c + i) : 0.0f);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) persistent_layers(Args a) {
  __shared__ __align__(16) float xs[kFfn];
  __shared__ float red[kWarps];
  const int stages = 4 * kLayers;
  prefetch_slice(stage_of(a, 0), a.prefetch_bytes);
  for (int i = 0; i < stages; ++i) {
    const Stage s = stage_of(a, i);
    load_x(s, a.norm_w, a.eps, xs, red);
    run_stage(s, xs);
    if (i + 1 == stages) break;
    prefetch_slice(stage_of(a, i + 1), a.prefetch_bytes);
    grid_barrier(a.counter, gridDim.x * static_cast<unsigned>(i + 1));
  }
}

struct Model {
  std::vector<LayerWeights> w;
  float *h, *h2, *attn, *qkv, *gated, *norm_w, *h0;
  unsigned* counter;

  Model() {
    uint64_t seed = 1;
    auto weights = [&](size_t n) {
      __half* p = device_array<__half>(n);
      KVF_BENCH_CHECK(static_cast<cudaError_t>(bench_fill_f16(p, n, seed++)));
      return p;
    };
    for (int l = 0; l < kLayers; ++l) {
      w.push_back({weights(size_t{kQkv} * kHidden), weights(size_t{kHidden} * kHidden), weights(size_t{2} * kFfn * kHidden),
                   weights(size_t{kHidden} * kFfn)});
    }
    h = device_array<float>(kHidden), h2 = device_array<float>(kHidden), attn = device_array<float>(kHidden);
    qkv = device_array<float>(kQkv), gated = device_array<float>(kFfn), norm_w = device_array<float>(kHidden);
    h0 = device_array<float>(kHidden);
    counter = device_array<unsigned>(1);
    std::vector<float> host(kHidden);
    for (int i = 0; i < kHidden; ++i) host[i] = std::sin(0.37f * static_cast<float>(i));
    KVF_BENCH_CHECK(cudaMemcpy(h0, host.data(), kHidden * 4, cudaMemcpyHostToDevice));
    for (int i = 0; i < kHidden; ++i) host[i] = std::cos(0.11f * static_cast<float>(i));
    KVF_BENCH_CHECK(cudaMemcpy(attn, host.data(), kHidden * 4, cudaMemcpyHostToDevice));
    for (int i = 0; i < kHidden; ++i) host[i] = 1.0f + 0.1f * std::sin(static_cast<float>(i));
    KVF_BENCH_CHECK(cudaMemcpy(norm_w, host.data(), kHidden * 4, cudaMemcpyHostToDevice));
    make_groups();
  }

  // The step's groups over the same weights and buffers (qkv, o, gate/up, down a layer),
  // made once.
  std::vector<std::array<LinearGroup, 4>> groups;

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

  void step_kernels(cudaStream_t s) const {
    const kvf::exec::cuda::step::Launch l{s, nullptr, 0, {}};
    const float* in[4] = {h, attn, h2, gated};
    const int64_t k[4] = {kHidden, kHidden, kHidden, kFfn};
    for (const auto& layer : groups) {
      for (int i = 0; i < 4; ++i) kvf::exec::cuda::step::linear_group(in[i], 1, k[i], DType::kF16, layer[i], l);
    }
  }

  void persistent(cudaStream_t s, int blocks, int prefetch_bytes) const {
    Args a{};
    for (int l = 0; l < kLayers; ++l) a.layer[l] = w[static_cast<size_t>(l)];
    a.h = h, a.h2 = h2, a.attn = attn, a.qkv = qkv, a.gated = gated, a.norm_w = norm_w, a.eps = 1e-5f;
    a.counter = counter, a.prefetch_bytes = prefetch_bytes;
    KVF_BENCH_CHECK(cudaMemsetAsync(counter, 0, 4, s));
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kThreads);
    cfg.stream = s;
    KVF_BENCH_CHECK(cudaLaunchKernelEx(&cfg, persistent_layers, a));
  }

  std::vector<float> final_h(bool persistent_form, int blocks) const {
    KVF_BENCH_CHECK(cudaMemcpy(h, h0, kHidden * 4, cudaMemcpyDeviceToDevice));
    if (persistent_form) persistent(nullptr, blocks, 64 << 10);
    else step_kernels(nullptr);
    KVF_BENCH_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(kHidden);
    KVF_BENCH_CHECK(cudaMemcpy(out.data(), h, kHidden * 4, cudaMemcpyDeviceToHost));
    return out;
  }
};

double us_per_layer(const std::function<void(cudaStream_t)>& enqueue) {
  return 1e3 * kvf::bench_cuda::median_graph_ms(3, 15, 1, [&](int, cudaStream_t st) { enqueue(st); }) / kLayers;
}

}  // namespace

int main() {
  int sms = 0, per_sm = 0;
  KVF_BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The grid barrier needs every block resident at once: one a SM, on an otherwise idle GPU.
  KVF_BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_layers, kThreads, 0));
  if (per_sm < 1) {
    std::fprintf(stderr, "persistent_layers does not fit on a SM\n");
    return 1;
  }
  Model md;
  const std::vector<float> want = md.final_h(false, sms), got = md.final_h(true, sms);
  double worst = 0, scale = 0;
  for (int i = 0; i < kHidden; ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  std::printf("TinyLlama-1.1B linears, f16 weights, 1 row, %d layers per graph\n", kLayers);
  std::printf("persistent vs step kernels, final residual: max |diff| %.3g of max |h| %.3g (%.2g relative)\n", worst,
              scale, worst / scale);
  const double mb_layer = 2.0 * (static_cast<double>(kQkv) * kHidden + 1.0 * kHidden * kHidden + 2.0 * kFfn * kHidden +
                                 1.0 * kHidden * kFfn) / 1e6;
  const auto report = [&](const char* name, double us) {
    std::printf("%-34s %8.2f us/layer %6.2f TB/s\n", name, us, mb_layer / us);
  };
  report("step kernels (linear_group)", us_per_layer([&](cudaStream_t s) { md.step_kernels(s); }));
  for (int kb : {0, 32, 64, 128, 256}) {
    char name[64];
    std::snprintf(name, sizeof(name), "persistent, %d KB prefetch/block", kb);
    report(name, us_per_layer([&](cudaStream_t s) { md.persistent(s, sms, kb << 10); }));
  }
  return 0;
}
