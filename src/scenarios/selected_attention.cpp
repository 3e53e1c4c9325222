// `kvforge bench attention --selected`: one decode step's MLA attention over the latent cache,
// dense against DeepSeek-V3.2's indexer + block top-k + selected attention, both compiled by
// the default passes and run on the CPU executor, side by side at each context.
#include <cmath>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "exec/cpu/executor.h"
#include "ir/ops.h"
#include "scenarios/scenarios.h"

namespace kvf::bench {
namespace {

// A cache constant in the bench's KV dtype, widened for the compute as a cached step does.
Result<ir::V> cache(ir::Builder& b, const std::string& name, Shape shape, DType dtype, uint64_t seed) {
  Result<HostTensor> t = random_tensor(std::move(shape), dtype, seed);
  if (!t) return t.take_error();
  ir::V v = b.constant(name, std::move(*t));
  return dtype == DType::kF32 ? v : b.cast(v, DType::kF32);
}

enum class Form { kDense, kSelected, kIndexerOnly };

// The step at context lk: query at position lk - 1. Queries scale with a slot so that the
// executor cannot fold the step away when it binds.
Result<ir::Graph> step_graph(const SelectedBenchOptions& o, int64_t lk, Form form) {
  ir::Builder b(str_cat("mla.lk", lk));
  const int64_t r = o.kv_lora_rank, rot = o.rope_dim;
  ir::V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  ir::V step = b.reshape(b.cast(pos, DType::kF32), {1, 1, 1, 1}) * 0.0 + 1.0;
  Result<ir::V> c = cache(b, "kv_latent", {1, 1, lk, r}, o.kv_dtype, 1);
  Result<ir::V> k_rot = cache(b, "k_rot", {1, 1, lk, rot}, o.kv_dtype, 2);
  Result<HostTensor> q = random_tensor({1, o.heads, 1, r + rot}, DType::kF32, 3);
  if (!c || !k_rot || !q) return !c ? c.take_error() : !k_rot ? k_rot.take_error() : q.take_error();
  ir::V mask;
  if (form != Form::kDense) {
    Result<ir::V> keys = cache(b, "index_k", {1, 1, lk, o.index_dim}, o.kv_dtype, 4);
    Result<HostTensor> iq = random_tensor({1, o.index_heads, 1, o.index_dim}, DType::kF32, 5);
    Result<HostTensor> w = random_tensor({1, o.index_heads, 1, 1}, DType::kF32, 6);
    if (!keys || !iq || !w) return !keys ? keys.take_error() : !iq ? iq.take_error() : w.take_error();
    ir::V scores = ir::ops::indexer_scores(b.constant("index_q", std::move(*iq)) * step, *keys,
                                           b.constant("index_w", std::move(*w)),
                                           1.0 / std::sqrt(static_cast<double>(o.index_dim)));
    ir::V selected = ir::ops::block_topk(scores, pos, o.topk, 1);
    if (form == Form::kIndexerOnly) {
      b.output("selected", b.cast(selected, DType::kF32));
      return b.finish();
    }
    mask = ir::ops::selected_mask(selected, pos, lk, 1);
  }
  const ir::ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(r + rot)), .softcap = 0.0};
  b.output("out", ir::ops::attention_prefill(b.constant("q", std::move(*q)) * step, b.concat({*c, *k_rot}, 3), *c,
                                             mask, opts));
  return b.finish();
}

struct Runner {
  exec::StateStore state;
  std::unique_ptr<exec::cpu::CpuExecutor> ex;
  exec::SlotValues slots;
  Status run() { return ex->run(slots); }
};

Result<std::unique_ptr<Runner>> compiled(const SelectedBenchOptions& o, int64_t lk, Form form, ThreadPool& pool) {
  Result<ir::Graph> g = step_graph(o, lk, form);
  if (!g) return g.take_error();
  Result<compile::Compiled> c = compile::run_passes(*g, compile::default_passes());
  if (!c) return c.take_error();
  Result<plan::Plan> p = plan::make_plan(std::move(c->graph), plan::cpu_caps(pool.size()));
  if (!p) return p.take_error();
  auto r = std::make_unique<Runner>();
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex = exec::cpu::CpuExecutor::create(std::move(*p), r->state, pool);
  if (!ex) return ex.take_error();
  r->ex = std::move(*ex);
  r->slots = {{ir::Slot::kPos, {static_cast<int32_t>(lk - 1)}}};
  return r;
}

}  // namespace

Result<Table> selected_attention_scenario(const SelectedBenchOptions& o) {
  ThreadPool pool(o.threads);
  const int64_t elem = o.kv_dtype == DType::kF16 ? 2 : 4;
  Table t;
  t.title = str_cat("one decode step's MLA attention, ", o.heads, " heads, latent ", o.kv_lora_rank, " + rope ", o.rope_dim,
                    ", ", dtype_name(o.kv_dtype), " cache; selected: indexer ", o.index_heads, "x", o.index_dim,
                    ", top ", o.topk, " keys; ", pool.size(), " threads; MB = 1e6 bytes read");
  t.columns = {"context", "dense_ms", "selected_ms", "speedup", "indexer_ms", "dense_MB", "selected_attention_MB",
               "indexer_MB", "attention_bytes_ratio"};
  int64_t measured = 0;
  for (int64_t lk : o.contexts) {
    if (o.progress) o.progress(measured++, static_cast<int64_t>(o.contexts.size()));
    Result<std::unique_ptr<Runner>> dense = compiled(o, lk, Form::kDense, pool);
    if (!dense) return dense.take_error();
    Result<std::unique_ptr<Runner>> selected = compiled(o, lk, Form::kSelected, pool);
    if (!selected) return selected.take_error();
    Result<std::pair<double, double>> times =
        paired_median_seconds(o.repeats, [&] { return (*dense)->run(); }, [&] { return (*selected)->run(); });
    if (!times) return times.take_error();
    Result<std::unique_ptr<Runner>> indexer = compiled(o, lk, Form::kIndexerOnly, pool);
    if (!indexer) return indexer.take_error();
    Result<double> indexer_s = median_seconds(o.repeats, [&] { return (*indexer)->run(); });
    if (!indexer_s) return indexer_s.take_error();
    const int64_t row = o.kv_lora_rank + o.rope_dim, kept = std::min(lk, o.topk);
    const double dense_mb = static_cast<double>(lk * row * elem) / 1e6;
    const double selected_mb = static_cast<double>(kept * row * elem) / 1e6;
    const double indexer_mb = static_cast<double>(lk * o.index_dim * elem) / 1e6;
    t.rows.push_back({std::to_string(lk), fixed(times->first * 1e3, 2), fixed(times->second * 1e3, 2),
                      fixed(times->first / times->second, 2) + "x", fixed(*indexer_s * 1e3, 2), fixed(dense_mb, 1),
                      fixed(selected_mb, 1), fixed(indexer_mb, 1), fixed(dense_mb / selected_mb, 1) + "x"});
  }
  return t;
}

}  // namespace kvf::bench
