// Micro-benchmarks of the CPU linear kernels at the shapes of a ~125M llama (hidden 768,
// ffn 2048, vocab 32000): GEMV (m = 1, decode) as weight bytes streamed per second, next to
// the machine's memory read bandwidth measured in the same binary; GEMM (m = 512, prefill)
// in GFLOP/s next to one core's 512-bit FMA peak; and the thread pool's cost per
// parallel_for. Run with
// --benchmark_repetitions=5 --benchmark_report_aggregates_only and read the medians.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "exec/cpu/linear.h"

namespace kvf {
namespace {

// ---------------------------------------------------------------- thread pool

// Back-to-back calls with trivial chunks: the dispatch cost as decode pays it ~100 times a
// token. Arg: pool size.
void BM_parallel_for_empty(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(64, [&](int64_t b, int64_t e) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_parallel_for_empty)->Arg(1)->Arg(2)->UseRealTime();

void spin_for(std::chrono::nanoseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// The latency until a worker joins: after the caller worked alone for `gap` us, a job of
// two chunks that each wait for the other, so it ends only once a worker runs one.
void BM_parallel_for_wake(benchmark::State& state) {
  ThreadPool pool(2);
  const auto gap = std::chrono::microseconds(state.range(0));
  for (auto _ : state) {
    spin_for(gap);
    std::atomic<int> arrived{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(2, [&](int64_t, int64_t) {
      arrived.fetch_add(1);
      while (arrived.load() < 2) {
      }
    });
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}
BENCHMARK(BM_parallel_for_wake)->Arg(20)->Arg(1000)->UseManualTime();

// ---------------------------------------------------------------- memory bandwidth

// Sums a 1 GiB f32 array: the read bandwidth a GEMV can hope for. Arg: threads.
void BM_memory_read(benchmark::State& state) {
  static std::vector<float> data = [] {
    std::vector<float> v(size_t{1} << 28);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i & 7);
    return v;
  }();
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t n = static_cast<int64_t>(data.size());
  for (auto _ : state) {
    std::atomic<int64_t> total{0};
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          float acc[16] = {};
          for (int64_t i = b; i + 16 <= e; i += 16) {
            for (int t = 0; t < 16; ++t) acc[t] += data[static_cast<size_t>(i + t)];
          }
          float s = 0;
          for (float a : acc) s += a;
          total.fetch_add(static_cast<int64_t>(s));
        },
        n / 8);
    benchmark::DoNotOptimize(total.load());
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(BM_memory_read)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------- FMA peak

// 12 independent chains of 512-bit FMAs on one core: the f32 peak a GEMM is a fraction of.
__attribute__((target("avx512f"), noinline)) float fma_chains(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  alignas(64) float lanes[12][16];
  for (int i = 0; i < 12; ++i) _mm512_store_ps(lanes[i], acc[i]);
  float s = 0;
  for (const auto& l : lanes) s += l[0] + l[15];
  return s;
}

void BM_fma_peak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  for (auto _ : state) {
    int64_t iters = kIters;
    benchmark::DoNotOptimize(iters);  // a fresh, opaque argument: the call cannot be hoisted
    benchmark::DoNotOptimize(fma_chains(iters));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(kIters) * 12 * 32 * 1e-9 *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_fma_peak)->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------- linear

// Random weights in their stored bytes (values are irrelevant to speed, but kept finite).
std::vector<uint8_t> random_weights(DType dt, int64_t n, int64_t k) {
  const int64_t row = k / block_elems(dt) * block_bytes(dt);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * row));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const int64_t bb = block_bytes(dt);
  for (int64_t at = 0; at + bb <= static_cast<int64_t>(bytes.size()); at += bb) {
    if (dt == DType::kF32) {
      const float v = 0.01f * static_cast<float>(byte(rng) - 128);
      std::memcpy(&bytes[static_cast<size_t>(at)], &v, 4);
    } else if (is_kquant(dt)) {  // the f16 scales: d and dmin of q4_k/q5_k, d of q6_k
      const uint16_t h = f32_to_f16_bits(1e-4f);
      for (int64_t off : dt == DType::kQ6_K ? std::vector<int64_t>{208} : std::vector<int64_t>{0, 2}) {
        std::memcpy(&bytes[static_cast<size_t>(at + off)], &h, 2);
      }
    } else if (dt != DType::kBF16) {  // f16 values, and the f16 scale of q8_0/q4_0 blocks
      const uint16_t h = f32_to_f16_bits(0.001f * static_cast<float>(byte(rng) - 128));
      std::memcpy(&bytes[static_cast<size_t>(at)], &h, 2);
    } else {
      bytes[static_cast<size_t>(at) + 1] &= 0xbf;  // bf16 exponent below 2^0: finite, small
    }
  }
  return bytes;
}

const DType kDtypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
const int64_t kShapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};  // {n, k}

// Args: dtype index, shape index, threads, m, and whether the weights are packed ahead where
// the executor would pack them (1) or each call packs its own panels (0).
void BM_linear(benchmark::State& state) {
  const DType dt = kDtypes[state.range(0)];
  const int64_t n = kShapes[state.range(1)][0], k = kShapes[state.range(1)][1];
  const int64_t m = state.range(3);
  ThreadPool pool(static_cast<int>(state.range(2)));
  const std::vector<uint8_t> w = random_weights(dt, n, k);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)), bias(static_cast<size_t>(n), 0.5f);
  std::mt19937 rng(3);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  const exec::cpu::WeightView view{dt, w.data(), n, k};
  // As the executor runs it: the weights packed ahead where that pays, once, at bind time.
  const std::shared_ptr<const exec::cpu::PackedWeights> packed =
      state.range(4) != 0 ? exec::cpu::pack_weights(pool, view, m) : nullptr;
  for (auto _ : state) {
    exec::cpu::linear(pool, x.data(), m, k, view, bias.data(), y.data(), n, packed.get());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dtype_name(dt)) + " " + std::to_string(n) + "x" + std::to_string(k) + " m=" +
                 std::to_string(m) + " t=" + std::to_string(pool.size()) + " " + exec::cpu::linear_isa() +
                 (packed ? " packed ahead" : ""));
  if (m == 1) {
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.size()));
  } else {
    const double gflop = static_cast<double>(2 * m * n * k) * 1e-9;
    state.counters["GFLOP/s"] =
        benchmark::Counter(gflop * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  }
}

void linear_args(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 4, 16, 64, 512}) {
    for (int64_t d = 0; d < static_cast<int64_t>(std::size(kDtypes)); ++d) {
      for (int64_t s = 0; s < 4; ++s) {
        for (int64_t t : {1, 2}) {
          b->Args({d, s, t, m, 1});
          if (is_block_quant(kDtypes[d]) && (m == 16 || m == 64)) b->Args({d, s, t, m, 0});  // the cost of packing per call
        }
      }
    }
  }
}
BENCHMARK(BM_linear)->Apply(linear_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvf

BENCHMARK_MAIN();
