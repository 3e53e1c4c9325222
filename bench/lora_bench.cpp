// Micro-benchmarks of the CPU LoRA kernel (exec/cpu/lora.cpp) at the shapes of a ~125M llama
// (hidden 768, ffn 2048) with rank-16 adapters: one decode row on one adapter (tg), and a
// batched decode of 16 rows spread over 4 adapters. Reported as the adapters' factor bytes
// read per second (each used adapter's A and B once). Args: threads, and factors f32 (0) or
// f16 (1, as beside an f16 or quantized base). Run with
// --benchmark_repetitions=5 --benchmark_report_aggregates_only and read the medians.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "exec/cpu/lora.h"
#include "plan/plan.h"

namespace kvf {
namespace {

struct Shape {
  int64_t rows, in, out, rank, adapters;  // adapters: the used ones (stack entries 1..adapters)
};

void run(benchmark::State& state, const Shape& sh) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t entries = sh.adapters + 1;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = u(rng);
    return v;
  };
  std::vector<float> x = fill(sh.rows * sh.in), y = fill(sh.rows * sh.out), out(y.size());
  std::vector<float> a = fill(entries * sh.rank * sh.in), b = fill(entries * sh.out * sh.rank), s = fill(entries);
  const bool half = state.range(1) == 1;
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = f32_to_f16_bits(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = f32_to_f16_bits(b[i]);
  std::vector<int32_t> ids(static_cast<size_t>(sh.rows));
  for (int64_t t = 0; t < sh.rows; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>(1 + t % sh.adapters);
  std::vector<float> scratch(static_cast<size_t>(plan::lora_scratch_floats(sh.rows, sh.in, sh.rank, plan::Target::kCpu)));
  const exec::cpu::LoraArgs args{.y = y.data(), .x = x.data(), .rows = sh.rows, .in = sh.in, .out = sh.out,
                                 .rank = sh.rank, .adapters = entries, .factors = half ? DType::kF16 : DType::kF32,
                                 .a = half ? static_cast<const void*>(a16.data()) : a.data(),
                                 .b = half ? static_cast<const void*>(b16.data()) : b.data(), .s = s.data(),
                                 .ids = ids.data(), .result = out.data(), .scratch = scratch.data()};
  for (auto _ : state) {
    exec::cpu::lora(pool, args);
    benchmark::DoNotOptimize(out.data());
  }
  const int64_t bytes = sh.adapters * sh.rank * (sh.in + sh.out) * (half ? 2 : 4);
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_lora_tg_qkvo(benchmark::State& s) { run(s, {1, 768, 768, 16, 1}); }
void BM_lora_tg_gate_up(benchmark::State& s) { run(s, {1, 768, 2048, 16, 1}); }
void BM_lora_tg_down(benchmark::State& s) { run(s, {1, 2048, 768, 16, 1}); }
void BM_lora_batch16_qkvo(benchmark::State& s) { run(s, {16, 768, 768, 16, 4}); }
void BM_lora_batch16_gate_up(benchmark::State& s) { run(s, {16, 768, 2048, 16, 4}); }
void BM_lora_batch16_down(benchmark::State& s) { run(s, {16, 2048, 768, 16, 4}); }
BENCHMARK(BM_lora_tg_qkvo)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();
BENCHMARK(BM_lora_tg_gate_up)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();
BENCHMARK(BM_lora_tg_down)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();
BENCHMARK(BM_lora_batch16_qkvo)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();
BENCHMARK(BM_lora_batch16_gate_up)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();
BENCHMARK(BM_lora_batch16_down)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();

}  // namespace
}  // namespace kvf

BENCHMARK_MAIN();
