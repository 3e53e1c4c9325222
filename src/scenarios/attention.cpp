// `kvforge bench attention`: the fused Attention kernel against the primitive decomposition
// the tracer emits, both on the CPU executor, decode and prefill, with the K/V read rate
// next to the machine's measured memory bandwidth.
#include <cmath>

#include "scenarios/scenarios.h"
#include "compile/passes.h"
#include "compile/pipeline.h"
#include "exec/cpu/executor.h"
#include "ir/ops.h"

namespace kvf::bench {
namespace {

struct Case {
  ir::Graph graph;
  std::vector<int32_t> pos;
};

Result<Case> attention_case(const AttentionBenchOptions& o, int64_t lq, int64_t lk) {
  ir::Builder b(str_cat("attention.lq", lq, ".lk", lk));
  Result<HostTensor> q = random_tensor({1, o.q_heads, lq, o.head_dim}, DType::kF32, 1);
  if (!q) return q.take_error();
  Result<HostTensor> k = random_tensor({1, o.kv_heads, lk, o.head_dim}, DType::kF32, 2);
  if (!k) return k.take_error();
  Result<HostTensor> v = random_tensor({1, o.kv_heads, lk, o.head_dim}, DType::kF32, 3);
  if (!v) return v.take_error();
  Case c;
  ir::V mask;
  ir::V pos = b.slot(ir::Slot::kPos, DType::kI32, {lq});
  for (int64_t i = 0; i < lq; ++i) c.pos.push_back(static_cast<int32_t>(lk - lq + i));
  if (lq > 1) mask = ir::ops::causal_mask(pos, lk);  // prefill: causal over the step's own rows
  // q depends on a slot, so the executor cannot fold the whole attention away at bind time.
  ir::V step = b.reshape(b.cast(b.slice_axis(pos, 0, 0, 1), DType::kF32), {1, 1, 1, 1}) * 0.0 + 1.0;
  const ir::ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(o.head_dim)), .softcap = 0.0};
  b.output("out", ir::ops::attention_prefill(b.constant("q", std::move(*q)) * step, b.constant("k", std::move(*k)),
                                             b.constant("v", std::move(*v)), mask, opts));
  Result<ir::Graph> g = b.finish();
  if (!g) return g.take_error();
  c.graph = std::move(*g);
  return c;
}

// Median seconds of one run of g (compiled by the default passes when `fused`).
Result<double> time_graph(const Case& c, bool fused, ThreadPool& pool, int repeats, std::string* schedule) {
  ir::Graph g = c.graph;
  if (fused) {
    Result<compile::Compiled> cg = compile::run_passes(g, compile::default_passes());
    if (!cg) return cg.take_error();
    g = std::move(cg->graph);
  }
  Result<plan::Plan> p = plan::make_plan(std::move(g), plan::cpu_caps(pool.size()));
  if (!p) return p.take_error();
  for (const plan::KernelRequest& r : p->requests) {
    if (schedule && r.op == ir::OpKind::kAttention) *schedule = r.kernel;
  }
  exec::StateStore state;
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex = exec::cpu::CpuExecutor::create(std::move(*p), state, pool);
  if (!ex) return ex.take_error();
  exec::SlotValues slots{{ir::Slot::kPos, c.pos}};
  return median_seconds(repeats, [&] { return (*ex)->run(slots); });
}

// What the decomposition materializes: the repeated K and V, K's transpose, the scores.
int64_t decomposed_bytes(const AttentionBenchOptions& o, int64_t lq, int64_t lk) {
  return 4 * (3 * o.q_heads * lk * o.head_dim + 3 * o.q_heads * lq * lk);
}

}  // namespace

Result<Table> attention_scenario(const AttentionBenchOptions& o) {
  ThreadPool pool(o.threads);
  const double bw = memory_read_gbps(pool);
  Table t;
  t.title = str_cat("attention, ", o.q_heads, "/", o.kv_heads, " heads, d=", o.head_dim, ", f32 K/V, ", pool.size(),
                    " threads; memory read bandwidth ", fixed(bw, 1), " GB/s");
  t.columns = {"phase", "context", "fused_ms", "decomposed_ms", "speedup", "kv_GB/s", "of_bandwidth", "schedule"};
  int64_t measured = 0;
  for (int64_t lk : o.contexts) {
    if (o.progress) o.progress(measured++, static_cast<int64_t>(o.contexts.size()));
    for (int64_t lq : {int64_t{1}, lk}) {
      if (lq > 1 && lk > o.max_prefill) continue;
      Result<Case> c = attention_case(o, lq, lk);
      if (!c) return c.take_error();
      std::string schedule;
      Result<double> fused = time_graph(*c, true, pool, o.repeats, &schedule);
      if (!fused) return fused.take_error();
      std::string dec = "-", speedup = "-";
      if (decomposed_bytes(o, lq, lk) <= o.max_decomposed_bytes) {
        Result<double> d = time_graph(*c, false, pool, std::max(1, o.repeats / 2), nullptr);
        if (!d) return d.take_error();
        dec = fixed(*d * 1e3, 3);
        speedup = fixed(*d / *fused, 1) + "x";
      }
      const double kv_bytes = 2.0 * static_cast<double>(o.kv_heads * lk * o.head_dim * 4);
      const double gbps = kv_bytes / *fused / 1e9;
      t.rows.push_back({lq == 1 ? "decode" : "prefill", std::to_string(lk), fixed(*fused * 1e3, 3), dec, speedup,
                        fixed(gbps, 1), fixed(100.0 * gbps / bw, 0) + "%", schedule});
    }
  }
  return t;
}

}  // namespace kvf::bench
