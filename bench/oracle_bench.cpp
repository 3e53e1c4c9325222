// Micro-benchmarks of the engine core: half conversions, q8_0/q4_0 dequantization, the
// thread pool's dispatch cost, the oracle on one attention_masked decode step and one
// toy-llama decode step, and the validations of a llama decode step and of a paged batch
// checked on the host (what a GPU step would spend on them before it launches). The oracle
// is the slow reference; these numbers are the baseline the fast paths (exec/) are measured
// against, as ratios in one run.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "eval/oracle.h"
#include "exec/step_checks.h"
#include "ir/ops.h"
#include "models/model.h"
#include "models/toy_llama.h"

namespace kvf {
namespace {

template <class T>
T must(Result<T> r) {
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

void BM_F32ToF16(benchmark::State& state) {
  std::vector<float> x(4096);
  std::mt19937 rng(1);
  for (float& v : x) v = std::uniform_real_distribution<float>(-100, 100)(rng);
  for (auto _ : state) {
    uint32_t acc = 0;
    for (float v : x) acc += f32_to_f16_bits(v);
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(x.size()));
}
BENCHMARK(BM_F32ToF16);

void BM_Dequantize(benchmark::State& state) {
  const DType dt = state.range(0) == 0 ? DType::kQ8_0 : DType::kQ4_0;
  const int64_t n = 4096;
  std::vector<uint8_t> blocks(static_cast<size_t>(must(storage_bytes(dt, n))), 0x5a);
  std::vector<float> out(n);
  for (auto _ : state) {
    Status s = dequantize_row(dt, blocks.data(), out.data(), n);
    s.ignore();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(std::string(dtype_name(dt)));
}
BENCHMARK(BM_Dequantize)->Arg(0)->Arg(1);

void BM_ThreadPoolDispatch(benchmark::State& state) {
  ThreadPool pool(2);
  std::vector<int64_t> sink(64);
  for (auto _ : state) {
    pool.parallel_for(64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sink[static_cast<size_t>(i)] += i;
    });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ThreadPoolDispatch);

// One decode step of attention_masked: Hq 8, Hkv 2, head dim 64, capacity from the arg.
using ir::V;

void BM_OracleAttentionDecode(benchmark::State& state) {
  const int64_t cap = state.range(0), hq = 8, hkv = 2, d = 64;
  ir::Builder b("bench_attention");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  auto zeros = [&](const char* name, Shape s) { return b.constant(name, must(HostTensor::zeros(DType::kF32, s))); };
  V kc = b.state("k_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kKeyCache, 0);
  V vc = b.state("v_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kValueCache, 0);
  auto r = ir::ops::attention_masked(zeros("q", {1, hq, 1, d}), zeros("k", {1, hkv, 1, d}), zeros("v", {1, hkv, 1, d}),
                                     kc, vc, pos, ir::ops::causal_mask(pos, cap), {.scale = 0.125, .softcap = 0});
  b.output("out", r.out);
  const ir::Graph g = must(b.finish());
  eval::StateStore st;
  Status s = eval::allocate_state(g, st);
  s.ignore();
  eval::Oracle oracle;
  eval::SlotBindings slots{{ir::Slot::kPos, must(eval::Buffer::i32({1}, {static_cast<int32_t>(cap / 2)}))}};
  for (auto _ : state) {
    Result<eval::Outputs> out = oracle.run(g, slots, st);
    if (!out) state.SkipWithError(out.error().to_string().c_str());
  }
  state.SetLabel("oracle, Hq 8 / Hkv 2, d 64");
}
BENCHMARK(BM_OracleAttentionDecode)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

// One decode step of the demo's toy llama (4 layers, dim 256, cap 128).
void BM_OracleToyLlamaDecode(benchmark::State& state) {
  models::ToyLlamaConfig cfg;
  const models::ToyLlamaWeights w = must(models::random_toy_weights(cfg, 7));
  const ir::Graph g = must(models::trace_toy_llama(cfg, w, 1, models::ToyMode::kCached));
  eval::StateStore st;
  Status s = eval::allocate_state(g, st);
  s.ignore();
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = static_cast<int>(state.range(0))});
  eval::SlotBindings slots{{ir::Slot::kPos, must(eval::Buffer::i32({1}, {64}))},
                           {ir::Slot::kToken, must(eval::Buffer::i32({1}, {3}))}};
  for (auto _ : state) {
    Result<eval::Outputs> out = oracle.run(g, slots, st);
    if (!out) state.SkipWithError(out.error().to_string().c_str());
  }
  state.SetLabel("oracle threads = arg");
}
BENCHMARK(BM_OracleToyLlamaDecode)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// A decode step's validations (the token's range, the attention's live length), as the
// CUDA executor checks them on the host each step: exec::check_on_host over
// exec::host_validations of a synthetic llama's compiled decode step (6 layers).
void BM_HostValidationsOfADecodeStep(benchmark::State& state) {
  const models::Model m = must(models::open_model("synthetic:llama-15m", {.with_tokenizer = false}));
  const ir::Graph traced = must(m.trace_step({.n_tokens = 1, .capacity = 512, .cached = true, .last_logits = true}));
  const ir::Graph g = must(compile::run_passes(traced, compile::default_passes())).graph;
  const std::optional<ir::Graph> checks = exec::host_validations(g, 1 << 14);
  if (!checks) {
    state.SkipWithError("the step's validations are not host-checkable");
    return;
  }
  const exec::SlotValues slots{{ir::Slot::kToken, {3}}, {ir::Slot::kPos, {64}}};
  for (auto _ : state) {
    Status s = exec::check_on_host(g, *checks, slots);
    if (!s) state.SkipWithError(s.error().to_string().c_str());
  }
  state.SetLabel(str_cat(g.validations.size(), " validations, ", checks->eqns.size(), " eqns"));
}
BENCHMARK(BM_HostValidationsOfADecodeStep)->Unit(benchmark::kMicrosecond);

// A paged batch of `rows` decode rows over kPagedKeys keys each (llama-15m, f16 pool): the
// traced step and the slots a driver would give it (each row its own run of pool slots).
constexpr int64_t kPagedKeys = 256;
struct PagedBatchStep {
  ir::Graph traced;
  exec::SlotValues slots;
};
PagedBatchStep paged_batch_step(int64_t rows) {
  const models::Model m = must(models::open_model("synthetic:llama-15m", {.with_tokenizer = false}));
  const int64_t keys = kPagedKeys;
  PagedBatchStep s{must(m.trace_step({.n_tokens = 1, .capacity = keys, .cached = true, .kv_dtype = DType::kF16,
                                      .pool_slots = keys * rows, .rows = rows})),
                   {}};
  for (int64_t r = 0; r < rows; ++r) {
    s.slots[ir::Slot::kToken].push_back(7);
    s.slots[ir::Slot::kPos].push_back(static_cast<int32_t>(keys - 1));
    s.slots[ir::Slot::kWriteMap].push_back(static_cast<int32_t>(r * keys + keys - 1));
    for (int64_t j = 0; j < keys; ++j) {
      s.slots[ir::Slot::kSlotMap].push_back(static_cast<int32_t>(r * keys + j));
      s.slots[ir::Slot::kKeyPos].push_back(static_cast<int32_t>(j));
    }
  }
  return s;
}

// The same for a paged batch: its key positions [rows, kPagedKeys] are what the validations
// read, so the host's cost grows with the batch (the CUDA executor checks such a step on the
// device instead).
void BM_HostValidationsOfAPagedBatchStep(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const PagedBatchStep step = paged_batch_step(rows);
  const ir::Graph g = must(compile::run_passes(step.traced, compile::default_passes())).graph;
  const std::optional<ir::Graph> checks = exec::host_validations(g, rows * kPagedKeys);
  if (!checks) {
    state.SkipWithError("the step's validations are not host-checkable");
    return;
  }
  for (auto _ : state) {
    Status s = exec::check_on_host(g, *checks, step.slots);
    if (!s) state.SkipWithError(s.error().to_string().c_str());
  }
  state.SetLabel(str_cat(g.validations.size(), " validations, ", checks->eqns.size(), " eqns"));
}
BENCHMARK(BM_HostValidationsOfAPagedBatchStep)->Arg(8)->Arg(64)->Unit(benchmark::kMicrosecond);

// What every executor checks of the same step's slots before it (exec::check_slots: each
// bound, its size, the maps' slots inside the pool and no write slot named twice).
void BM_SlotChecksOfAPagedBatchStep(benchmark::State& state) {
  const PagedBatchStep step = paged_batch_step(state.range(0));
  const ir::Graph& g = step.traced;
  const exec::SlotValues& slots = step.slots;
  for (auto _ : state) {
    Status s = exec::check_slots(g, slots);
    if (!s) state.SkipWithError(s.error().to_string().c_str());
  }
}
BENCHMARK(BM_SlotChecksOfAPagedBatchStep)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvf

BENCHMARK_MAIN();
