// The decode linears over f16 weights (exec/cuda/step/gemv16.cuh) on a TinyLlama-1.1B layer's
// shapes, as a decode step runs them: per layer QKV (RMSNorm fused, three parts), O (residual
// add), gate/up (RMSNorm and SiLU gate fused) and down (residual add), each layer with its
// own weights (22 layers, 1.9 GB: nothing is served from L2), captured as one CUDA graph and
// replayed. Prints, for each kernel shape (columns per warp C, 16-byte groups in flight G,
// warps per block W, programmatic dependent launch), the time per layer and the weight
// bandwidth it reaches, and the same for each linear alone (22 launches of it in a graph);
// then the same for the shared-memory bulk-copy kernel (gemv_bulk.cuh). From 2 rows, also
// what the step's dispatcher runs with the tensor cores allowed (linear_group: the gemv
// kernels up to 8 rows, cuBLASLt from 9) against the batched-decode tensor-core kernel
// (gemm_rows.cuh) at its production shape and a few others (tiles a warp, warps a block,
// splits of k against plan::gemm_rows_schedule's).
//
// On a Hopper device, "stream" is the streaming kernel (gemm_stream_sm90a.cu) at any rows
// ("stream sN": N splits of k a tile instead of the schedule's). "dispatch" is the step's
// choice; up to 8 rows "dispatch, before" is it without gemm_rows, from 9 rows "cublaslt" is
// cuBLASLt for every group. At 1 row, "bulk RnWm" is the bulk-copy kernel at n weight rows and
// m warps a block (the step picks 8 rows' worth up to 48 KB, 4 warps).
//
// At 1 row, "row RnWm" is the one-row form of the bulk-copy kernel (gemv_bulk_row_kernel).
//
// KVF_BENCH_DTYPE=q8_0 stores the weights as q8_0 and runs only the bulk-copy shapes and the
// dispatcher (the register and tensor-core kernels read 16-bit weights).
//
//   bench_cuda_gemv [rows=1] [filter]  (rows 1..64; only the shapes whose name holds one of
//                                       filter's '|'-separated parts)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "event_timer.h"
#include "exec/cuda/device_props.h"
#include "exec/cuda/step/gemm_rows.cuh"
#include "exec/cuda/step/gemm_stream.cuh"
#include "exec/cuda/step/gemv_bulk.cuh"
#include "plan/gemm_rows_schedule.h"

namespace {

using kvf::DType;
using kvf::exec::cuda::step::LinearGroup;
using kvf::exec::cuda::step::LinearPart;

constexpr int kLayers = 22, kHidden = 2048, kKv = 256, kFfn = 5632;

// The weights' stored type: f16, or q8_0 with KVF_BENCH_DTYPE=q8_0 (then only the shapes that
// read it: the bulk-copy kernel's, and the step's dispatcher).
DType weight_type() {
  const char* t = std::getenv("KVF_BENCH_DTYPE");
  return t != nullptr && std::string(t) == "q8_0" ? DType::kQ8_0 : DType::kF16;
}
const DType kWeights = weight_type();

void* device_bytes(size_t bytes, int fill) {
  void* p = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&p, bytes));
  KVF_BENCH_CHECK(cudaMemset(p, fill, bytes));
  return p;
}

struct Layer {
  LinearGroup qkv, o, gate_up, down;
};

// One step's buffers: x rows [m, width] for every activation, and per layer its weights.
struct Model {
  int m;
  float *h, *q, *k, *v, *attn, *h2, *gate, *up, *gated, *norm_w;  // gate, up: cuBLASLt's products
  std::vector<Layer> layers;

  explicit Model(int rows) : m(rows) {
    auto act = [&](int width) { return static_cast<float*>(device_bytes(sizeof(float) * m * width, 0)); };
    h = act(kHidden), q = act(kHidden), k = act(kKv), v = act(kKv), attn = act(kHidden), h2 = act(kHidden);
    gate = act(kFfn), up = act(kFfn), gated = act(kFfn);
    norm_w = act(kHidden);
    // 0x1c: f16 ~0.004; q8_0 scales ~0.004 times quants of 28
    auto weights = [](int n, int k) { return device_bytes(static_cast<size_t>(n * kvf::exec::cuda::step::stored_row_bytes(kWeights, k)), 0x1c); };
    for (int l = 0; l < kLayers; ++l) {
      Layer L;
      L.qkv.parts = 3;
      L.qkv.part[0] = LinearPart{weights(kHidden, kHidden), nullptr, kHidden, q};
      L.qkv.part[1] = LinearPart{weights(kKv, kHidden), nullptr, kKv, k};
      L.qkv.part[2] = LinearPart{weights(kKv, kHidden), nullptr, kKv, v};
      L.qkv.norm_w = norm_w;
      L.qkv.norm_eps = 1e-5;
      L.o.part[0] = LinearPart{weights(kHidden, kHidden), nullptr, kHidden, nullptr};
      L.o.residual = h;
      L.o.residual_out = h2;
      L.gate_up.parts = 2;
      L.gate_up.part[0] = LinearPart{weights(kFfn, kHidden), nullptr, kFfn, gate};
      L.gate_up.part[1] = LinearPart{weights(kFfn, kHidden), nullptr, kFfn, up};
      L.gate_up.glu = true;
      L.gate_up.glu_out = gated;
      L.gate_up.norm_w = norm_w;
      L.gate_up.norm_eps = 1e-5;
      L.down.part[0] = LinearPart{weights(kHidden, kFfn), nullptr, kHidden, nullptr};
      L.down.residual = h2;
      L.down.residual_out = h;
      layers.push_back(L);
    }
  }
};

// A kernel shape: how one linear group launches.
using Launcher = std::function<void(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s)>;

template <int MR, int C, int G, int W, bool PDL>
Launcher shape() {
  return [](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    using namespace kvf::exec::cuda::step::gemv16_detail;
    if (g.glu) launch<MR, DType::kF16, (C > 1 ? C / 2 : 1), G, W, true>(x, k, g, s, PDL);
    else launch<MR, DType::kF16, C, G, W, false>(x, k, g, s, PDL);
  };
}

// Each row's 1 / rms of x [MR, k] into inv, one block a row, as a programmatic dependent.
template <int MR>
__global__ void rms_inv_kernel(const float* x, int64_t k, double eps, float* inv) {
  kvf::exec::cuda::await_kernel_in_front();
  __shared__ float part[8];
  float ss = 0.0f;
  const auto* x4 = reinterpret_cast<const float4*>(x + blockIdx.x * k);
  for (int64_t c = threadIdx.x; c < k / 4; c += blockDim.x) ss += x4[c].x * x4[c].x + x4[c].y * x4[c].y + x4[c].z * x4[c].z + x4[c].w * x4[c].w;
  ss = kvf::exec::cuda::step::warp_sum(ss);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < 8; ++w) t += part[w];
    inv[blockIdx.x] = static_cast<float>(1.0 / sqrt(static_cast<double>(t) / static_cast<double>(k) + eps));
  }
}

// A shape with the norm's 1 / rms computed ahead by rms_inv_kernel instead of in every block.
Launcher with_inv(int rows, float* inv, Launcher go) {
  return [rows, inv, go](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    if (g.norm_w == nullptr) return go(x, k, g, s);
    kvf::exec::cuda::launch_programmatic(rms_inv_kernel<1>, dim3(rows), dim3(256), 0, s, true, x, k, g.norm_eps, inv);
    LinearGroup h = g;
    h.norm_inv = inv;
    go(x, k, h, s);
  };
}

template <int MR, bool PDL>
Launcher bulk() {
  return [](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    using namespace kvf::exec::cuda::step::gemv_bulk_detail;
    if (kWeights == DType::kQ8_0) launch_any_rows<MR, DType::kQ8_0>(x, MR, k, g, s, PDL);
    else launch_any_rows<MR, DType::kF16>(x, MR, k, g, s, PDL);
  };
}

// The bulk-copy kernel at R weight rows and W warps a block, past the 48 KB a launch takes
// unasked where R rows need it.
template <int MR, DType dt, int R, int W>
void bulk_at(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
  using namespace kvf::exec::cuda::step::gemv_bulk_detail;
  const int smem = static_cast<int>(R * kvf::exec::cuda::step::stored_row_bytes(dt, k));
  if (g.glu) {
    KVF_BENCH_CHECK(cudaFuncSetAttribute(gemv_bulk_kernel<MR, dt, R, true, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch<MR, dt, R, true, W>(x, MR, k, g, s, true);
  } else {
    KVF_BENCH_CHECK(cudaFuncSetAttribute(gemv_bulk_kernel<MR, dt, R, false, W>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch<MR, dt, R, false, W>(x, MR, k, g, s, true);
  }
}

// The one-row kernel (gemv_bulk_row_kernel) at R weight rows and W warps a block, U groups a
// thread: enough for the layer's widest row (5632 elements).
template <int R, int W>
Launcher row_shape() {
  return [](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    using namespace kvf::exec::cuda::step::gemv_bulk_detail;
    constexpr int U = W == 4 ? 8 : 4;
    if (kWeights == DType::kQ8_0) launch_row<DType::kQ8_0, R, W, U>(x, k, g, s);
    else launch_row<DType::kF16, R, W, U>(x, k, g, s);
  };
}

// The one-row kernel at one shape for some of the layer's groups and another for the rest:
// `pick` says which groups take `first`.
Launcher row_mix(bool (*pick)(const LinearGroup& g, int64_t k), Launcher first, Launcher rest) {
  return [pick, first, rest](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    (pick(g, k) ? first : rest)(x, k, g, s);
  };
}

template <int MR, int R, int W>
Launcher bulk_shape() {
  return [](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    if (kWeights == DType::kQ8_0) bulk_at<MR, DType::kQ8_0, R, W>(x, k, g, s);
    else bulk_at<MR, DType::kF16, R, W>(x, k, g, s);
  };
}

// The streaming kernel (gemm_stream_sm90a.cu) at any rows, whatever the step would pick;
// splits: of k a tile, 0 for the schedule's.
Launcher stream(int m, kvf::exec::cuda::step::TensorCores tc, int splits = 0) {
  return [m, tc, splits](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    kvf::exec::cuda::step::Launch l{s, nullptr, 0, tc};
    if (!kvf::exec::cuda::step::gemm_stream_detail::run_group(x, m, k, DType::kF16, g, l, splits)) std::abort();
  };
}

// cuBLASLt (tensor_cores.cu) for a group of 9 rows or more, whatever the step would pick.
Launcher cublaslt(int m, kvf::exec::cuda::step::TensorCores tc) {
  return [m, tc](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    kvf::exec::cuda::step::Launch l{s, nullptr, 0, tc};
    if (!kvf::exec::cuda::step::linear_group_tensor_cores(x, m, k, DType::kF16, g, l)) std::abort();
  };
}

// The tensor-core library, a scratch for x rounded to 16 bits and partial sums, and tile counters.
kvf::exec::cuda::step::TensorCores tensor_cores() {
  using namespace kvf::exec::cuda::step;
  TensorCores tc;
  tc.handle = tensor_cores_open();
  tc.workspace_bytes = 32 << 20;
  tc.workspace = device_bytes(static_cast<size_t>(tc.workspace_bytes), 0);
  tc.scratch_bytes = 256 << 20;
  tc.scratch = device_bytes(static_cast<size_t>(tc.scratch_bytes), 0);
  tc.counter_count = 4096;
  tc.counters = static_cast<unsigned*>(device_bytes(sizeof(unsigned) * 4096, 0));
  return tc;
}

// The step's dispatcher: rows_kernel false hides the tile counters, so that the linears go
// where they went before gemm_rows (the gemv kernels, or cuBLASLt from 9 rows).
Launcher dispatch(int m, kvf::exec::cuda::step::TensorCores tc, bool rows_kernel) {
  if (!rows_kernel) tc.counter_count = 0;
  return [m, tc](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    kvf::exec::cuda::step::Launch l{s, nullptr, 0, tc};
    kvf::exec::cuda::step::linear_group(x, m, k, kWeights, g, l);
  };
}

// gemm_rows.cuh at MT x-row tiles, NT tiles a warp, W warps, splits = the schedule's x factor.
// kernel false: only the rounding of x in front; prologue false: only the kernel (over
// whatever x16 holds), to see what each costs.
template <int MT, int NT, int W, int D = 2>
Launcher rows_shape(int m, kvf::exec::cuda::step::TensorCores tc, double split_factor, bool prologue = true,
                    bool kernel = true) {
  return [=](const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
    using namespace kvf::exec::cuda::step;
    Launch l{s, nullptr, 0, tc};
    if (prologue && g.norm_w != nullptr) rmsnorm_to_half(x, g.norm_w, tc.scratch, DType::kF16, m, k, g.norm_eps, false, l);
    else if (prologue) cast(DType::kF32, DType::kF16, x, tc.scratch, m * k, l);
    if (!kernel) return;
    const int64_t columns = gemv16_detail::group_columns(g);
    const int base = kvf::plan::gemm_rows_schedule((g.glu ? 2 : 1) * columns, k, kvf::exec::cuda::detail::sm_count(),
                                                   W * NT * 8).splits;
    gemm_rows_detail::Args a;
    a.x16 = tc.scratch;
    a.m = m;
    a.k = k;
    a.rows = columns;
    a.splits = static_cast<int>(std::clamp<double>(static_cast<double>(base) * split_factor, 1.0, static_cast<double>(k / 32)));
    a.partials = reinterpret_cast<float*>(static_cast<char*>(tc.scratch) + (16 << 20));
    a.counters = tc.counters;
    a.g = g;
    if (g.glu) gemm_rows_detail::launch<MT, NT, W, D, true, true>(a, s, true);
    else gemm_rows_detail::launch<MT, NT, W, D, true, false>(a, s, true);
  };
}

template <int MT>
void add_rows_shapes(int m, const kvf::exec::cuda::step::TensorCores& tc, std::vector<std::pair<std::string, Launcher>>& out) {
  out.push_back({"rows NT2 W4", rows_shape<MT, 2, 4>(m, tc, 1.0)});
  out.push_back({"rows kernel alone", rows_shape<MT, 2, 4>(m, tc, 1.0, false)});
  out.push_back({"rows x16 alone", rows_shape<MT, 2, 4>(m, tc, 1.0, true, false)});
  out.push_back({"rows NT2 W4 s/2", rows_shape<MT, 2, 4>(m, tc, 0.5)});
  out.push_back({"rows NT2 W4 s*2", rows_shape<MT, 2, 4>(m, tc, 2.0)});
  out.push_back({"rows NT4 W4", rows_shape<MT, 4, 4>(m, tc, 1.0)});
  out.push_back({"rows NT2 W8", rows_shape<MT, 2, 8>(m, tc, 1.0)});
  out.push_back({"rows NT4 W2", rows_shape<MT, 4, 2>(m, tc, 1.0)});
  out.push_back({"rows NT2 W4 D3", rows_shape<MT, 2, 4, 3>(m, tc, 1.0)});
  out.push_back({"rows NT2 W4 D4", rows_shape<MT, 2, 4, 4>(m, tc, 1.0)});
  out.push_back({"rows NT2 W2 D4", rows_shape<MT, 2, 2, 4>(m, tc, 1.0)});
  out.push_back({"rows NT2 W8 D3", rows_shape<MT, 2, 8, 3>(m, tc, 1.0)});
  out.push_back({"rows NT2 W4 D4 s*2", rows_shape<MT, 2, 4, 4>(m, tc, 2.0)});
  out.push_back({"rows NT2 W4 D4 s/2", rows_shape<MT, 2, 4, 4>(m, tc, 0.5)});
}

// Whether a shape's name holds one of filter's '|'-separated parts (an empty filter: any).
bool matches(const std::string& name, const std::string& filter) {
  size_t from = 0;
  while (true) {
    const size_t bar = filter.find('|', from);
    if (name.find(filter.substr(from, bar - from)) != std::string::npos) return true;
    if (bar == std::string::npos) return false;
    from = bar + 1;
  }
}

// Median microseconds per replay of what `enqueue` puts on the stream, captured as one graph.
double time_graph(const std::function<void(cudaStream_t)>& enqueue) {
  return 1e3 * kvf::bench_cuda::median_graph_ms(3, 15, 1, [&](int, cudaStream_t st) { enqueue(st); });
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 1;
  if (rows < 1 || rows > 64) {
    std::fprintf(stderr, "rows: 1 to 64\n");
    return 2;
  }
  Model md(rows);
  const double el = kWeights == DType::kQ8_0 ? 34.0 / 32.0 : 2.0;  // bytes an element
  const double mb_qkv = el * (kHidden + 2 * kKv) * kHidden / 1e6, mb_o = el * kHidden * kHidden / 1e6;
  const double mb_gu = el * 2 * kFfn * kHidden / 1e6, mb_down = el * kHidden * kFfn / 1e6;
  const double mb_layer = mb_qkv + mb_o + mb_gu + mb_down;
  std::vector<std::pair<std::string, Launcher>> shapes;
  if (kWeights == DType::kF16 && rows == 1) {
    shapes = {{"C4 G4 W4 -", shape<1, 4, 4, 4, false>()}, {"C4 G4 W4 pdl", shape<1, 4, 4, 4, true>()},
              {"C2 G4 W4 pdl", shape<1, 2, 4, 4, true>()}, {"C2 G8 W4 pdl", shape<1, 2, 8, 4, true>()},
              {"C1 G8 W4 pdl", shape<1, 1, 8, 4, true>()}, {"C4 G2 W4 pdl", shape<1, 4, 2, 4, true>()},
              {"C8 G2 W4 pdl", shape<1, 8, 2, 4, true>()}, {"C4 G4 W8 pdl", shape<1, 4, 4, 8, true>()},
              {"C2 G8 W8 pdl", shape<1, 2, 8, 8, true>()}, {"bulk -", bulk<1, false>()},
              {"bulk pdl", bulk<1, true>()},      {"bulk R8 W8", bulk_shape<1, 8, 8>()},
              {"bulk R16 W8", bulk_shape<1, 16, 8>()}, {"bulk R4 W4", bulk_shape<1, 4, 4>()}};
  } else if (kWeights == DType::kF16 && rows == 8) {
    shapes = {{"C2 G4 W4 -", shape<8, 2, 4, 4, false>()}, {"C2 G4 W4 pdl", shape<8, 2, 4, 4, true>()},
              {"C1 G4 W4 pdl", shape<8, 1, 4, 4, true>()}, {"C2 G2 W4 pdl", shape<8, 2, 2, 4, true>()},
              {"C4 G2 W4 pdl", shape<8, 4, 2, 4, true>()}, {"bulk pdl", bulk<8, true>()}};
  } else if (rows == 1) {  // q8_0: the bulk-copy kernel as the step ran it before the one-row kernel
    shapes = {{"bulk pdl", bulk<1, true>()}};
  } else if (rows == 8) {
    shapes = {{"bulk pdl", bulk<8, true>()}};
  }
  if (rows == 1) {
    shapes.push_back({"row R8 W8", row_shape<8, 8>()});
    shapes.push_back({"row R8 W4", row_shape<8, 4>()});
    shapes.push_back({"row R4 W4", row_shape<4, 4>()});
    shapes.push_back({"row R16 W8", row_shape<16, 8>()});
    shapes.push_back({"row R4 W8", row_shape<4, 8>()});
    // Each linear alone is faster at R8 W4 but for gate/up at R4: the mixes, in the layer.
    const auto no_glu = [](const LinearGroup& g, int64_t) { return !g.glu; };
    const auto down = [](const LinearGroup& g, int64_t k) { return !g.glu && k > 4096; };
    const auto qkv = [](const LinearGroup& g, int64_t) { return g.parts == 3; };
    shapes.push_back({"row R8W4 but glu R4W4", row_mix(no_glu, row_shape<8, 4>(), row_shape<4, 4>())});
    shapes.push_back({"row R4W4 but down R8W4", row_mix(down, row_shape<8, 4>(), row_shape<4, 4>())});
    shapes.push_back({"row R4W4 but qkv R8W4", row_mix(qkv, row_shape<8, 4>(), row_shape<4, 4>())});
  }
  const kvf::exec::cuda::step::TensorCores tc = tensor_cores();
  if (kWeights == DType::kQ8_0) {
    shapes.push_back({"dispatch", dispatch(rows, tc, true)});
  } else if (kvf::exec::cuda::detail::is_sm90()) {
    shapes.push_back({"stream", stream(rows, tc)});
    for (const int splits : {1, 2, 4, 8}) shapes.push_back({"stream s" + std::to_string(splits), stream(rows, tc, splits)});
  }
  auto* inv = static_cast<float*>(device_bytes(sizeof(float) * 64, 0));
  if (rows == 1 && kWeights == DType::kF16) {
    shapes.push_back({"C2 G8 W8 inv", with_inv(rows, inv, shape<1, 2, 8, 8, true>())});
    shapes.push_back({"bulk inv", with_inv(rows, inv, bulk<1, true>())});
    shapes.push_back({"dispatch", dispatch(rows, tc, true)});
  }
  if (rows == 1 && kWeights == DType::kQ8_0) shapes.push_back({"bulk inv", with_inv(rows, inv, bulk<1, true>())});
  if (rows >= 2 && kWeights == DType::kF16) {
    if (rows <= kvf::plan::kGemmRowsMax) shapes.push_back({"dispatch, before", dispatch(rows, tc, false)});
    else shapes.push_back({"cublaslt", cublaslt(rows, tc)});
    shapes.push_back({"dispatch", dispatch(rows, tc, true)});
    if (rows <= 16) add_rows_shapes<1>(rows, tc, shapes);
    else if (rows <= 32) add_rows_shapes<2>(rows, tc, shapes);
    else add_rows_shapes<4>(rows, tc, shapes);
  }
  std::printf("TinyLlama-1.1B layer linears, %s weights, %d row(s) of x, %d layers per graph\n",
              kWeights == DType::kQ8_0 ? "q8_0" : "f16", rows, kLayers);
  std::printf("%-18s %9s %8s | %8s %8s %8s %8s  (TB/s alone)\n", "shape", "us/layer", "TB/s", "qkv", "o", "gate_up", "down");
  const std::string filter = argc > 2 ? argv[2] : "";
  for (const auto& shape_entry : shapes) {
    const std::string& name = shape_entry.first;
    if (!matches(name, filter)) continue;
    const Launcher& go = shape_entry.second;
    // One eager pass first, outside any graph: a warm-up, and a launch error shows here.
    for (const Layer& L : md.layers) {
      go(md.h, kHidden, L.qkv, nullptr);
      go(md.attn, kHidden, L.o, nullptr);
      go(md.h2, kHidden, L.gate_up, nullptr);
      go(md.gated, kFfn, L.down, nullptr);
    }
    KVF_BENCH_CHECK(cudaGetLastError());
    KVF_BENCH_CHECK(cudaDeviceSynchronize());
    auto each = [&](auto pick, float* x, int64_t k) {
      return time_graph([&](cudaStream_t s) {
        for (const Layer& L : md.layers) go(x, k, pick(L), s);
      });
    };
    const double layer = time_graph([&](cudaStream_t s) {
                           for (const Layer& L : md.layers) {
                             go(md.h, kHidden, L.qkv, s);
                             go(md.attn, kHidden, L.o, s);
                             go(md.h2, kHidden, L.gate_up, s);
                             go(md.gated, kFfn, L.down, s);
                           }
                         }) / kLayers;
    const double qkv = each([](const Layer& L) { return L.qkv; }, md.h, kHidden) / kLayers;
    const double o = each([](const Layer& L) { return L.o; }, md.attn, kHidden) / kLayers;
    const double gu = each([](const Layer& L) { return L.gate_up; }, md.h2, kHidden) / kLayers;
    const double down = each([](const Layer& L) { return L.down; }, md.gated, kFfn) / kLayers;
    std::printf("%-18s %9.2f %8.2f | %8.2f %8.2f %8.2f %8.2f\n", name.c_str(), layer, mb_layer / layer,
                mb_qkv / qkv, mb_o / o, mb_gu / gu, mb_down / down);
  }
  return 0;
}
