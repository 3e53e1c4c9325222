// `kvforge bench decode-curve` (seed 003's table): per-token latency of generation at a
// given context, three ways: naive (a full forward over the whole context per token),
// cached (one step over the KV cache, attention left as primitives) and cached+fused.
#include "scenarios/scenarios.h"
#include "exec/cpu/executor.h"
#include "llm/generator.h"
#include "models/model.h"

namespace kvf::bench {
namespace {

// Per-token time of decoding the last `kSteps` tokens of a ctx-token context, one token
// per step (the cache already holds the earlier rows): a run of steps rather than one, so
// that a single step's noise on a shared machine does not decide the median.
constexpr int64_t kSteps = 16;

Result<double> cached_step(const models::Model& m, int64_t ctx, bool fused, const DecodeCurveOptions& o) {
  llm::GeneratorOptions g;
  g.threads = o.threads;
  g.last_logits = true;
  g.kv_dtype = o.kv_dtype;
  if (!fused) g.skip_passes = {"attention"};
  llm::Generator gen(m, ctx, g);
  const int64_t steps = std::min(kSteps, ctx);
  Result<double> t = median_seconds(o.repeats, [&]() -> Status {
    Status s = gen.seek(ctx - steps);
    if (!s) return s;
    for (int64_t i = 0; i < steps; ++i) {
      Result<std::vector<float>> r = gen.step({1});
      if (!r) return r.take_error();
    }
    return {};
  });
  if (!t) return t.take_error();
  return *t / static_cast<double>(steps);
}

// A full uncached forward over ctx tokens: what generating one token costs without a cache.
Result<double> naive_step(const models::Model& m, int64_t ctx, ThreadPool& pool, int repeats) {
  Result<ir::Graph> g = m.trace_step({.n_tokens = ctx, .capacity = 0, .cached = false, .last_logits = true});
  if (!g) return g.take_error();
  Result<plan::Plan> p = llm::compile_step(*g, plan::cpu_caps(pool.size()));
  if (!p) return p.take_error();
  exec::StateStore state;
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex = exec::cpu::CpuExecutor::create(std::move(*p), state, pool);
  if (!ex) return ex.take_error();
  exec::SlotValues slots{{ir::Slot::kToken, std::vector<int32_t>(static_cast<size_t>(ctx), 1)},
                         {ir::Slot::kPos, {}}};
  for (int64_t i = 0; i < ctx; ++i) slots[ir::Slot::kPos].push_back(static_cast<int32_t>(i));
  return median_seconds(repeats, [&] { return (*ex)->run(slots); }, false);
}

}  // namespace

Result<Table> decode_curve_scenario(const DecodeCurveOptions& o) {
  Result<models::Model> m = models::open_model(o.model, {.tokenizer_path = "", .check_finite = false, .with_tokenizer = false});
  if (!m) return m.take_error();
  ThreadPool pool(o.threads);
  Table t;
  t.title = str_cat("decode curve, ", o.model, ", ", pool.size(), " threads, KV ", dtype_name(o.kv_dtype),
                    ", ms per generated token (cached: the last ", kSteps, " tokens of the context, median of ", o.repeats,
                    " runs; naive: one full forward, median of ", o.repeats, ", 1 run at 2048+)");
  t.columns = {"context", "naive_ms", "cached_ms", "cached_fused_ms", "naive/fused", "cached/fused"};
  int64_t measured = 0;
  for (int64_t ctx : o.contexts) {
    if (o.progress) o.progress(measured++, static_cast<int64_t>(o.contexts.size()));
    Result<double> naive = naive_step(*m, ctx, pool, ctx >= 2048 ? 1 : o.repeats);
    if (!naive) return naive.take_error();
    Result<double> cached = cached_step(*m, ctx, false, o);
    if (!cached) return cached.take_error();
    Result<double> fused = cached_step(*m, ctx, true, o);
    if (!fused) return fused.take_error();
    t.rows.push_back({std::to_string(ctx), fixed(*naive * 1e3, 1), fixed(*cached * 1e3, 2), fixed(*fused * 1e3, 2),
                      fixed(*naive / *fused, 0) + "x", fixed(*cached / *fused, 1) + "x"});
  }
  return t;
}

}  // namespace kvf::bench
