// The numerics table (check.h).
#include "exec/ahbm/check.h"

#include <algorithm>

#include "eval/compare.h"

namespace kvf::ahbm {
namespace {

CheckRow row_of(std::string kase, std::string layout, DType storage, int n, int64_t context, int64_t q_start,
                int64_t request_id, Cycle cycles, double err) {
  CheckRow row{std::move(kase), std::move(layout), storage, n, context, q_start, request_id, err, tolerance_for(storage), cycles, false};
  row.pass = row.rel_error <= row.tolerance;
  return row;
}

// The prefill rows of one draw: every N and storage (and shard layout, for rings) against one reference.
Status prefill_rows(const AhbmConfig& cfg, const CheckOptions& opts, const GlobalInputs& g, std::vector<CheckRow>& rows) {
  Result<std::vector<double>> ref = oracle_prefill(g);
  if (!ref) return ref.take_error().context("ahbm check: the prefill oracle at context ", g.context);
  for (int n : opts.n_pes) {
    if (n > 1 && g.q_start() > 0) continue;  // a ring shards a whole prompt
    std::vector<ShardLayout> layouts = {ShardLayout::kContiguous};
    if (std::find(opts.ring_strided.begin(), opts.ring_strided.end(), n) != opts.ring_strided.end()) layouts.push_back(ShardLayout::kStrided);
    for (ShardLayout layout : layouts) {
      for (DType storage : opts.storages) {
        const int64_t request_id = 3 + g.context % 5;
        const PrefillInputs in = place_prefill(g, g.dims, storage, n, layout, request_id);
        Result<PrefillReport> r = run_prefill(cfg, in);
        if (!r) return r.take_error().context("ahbm check: prefill context ", g.context, " N ", n);
        const char* name = layout == ShardLayout::kContiguous ? "contiguous" : "strided";
        rows.push_back(row_of(n == 1 ? "prefill" : "prefill-sp", n == 1 ? "" : name, storage, n, g.context, g.q_start(),
                              request_id, r->cycles, rel_error(r->out, *ref)));
      }
    }
  }
  return {};
}

}  // namespace

double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  const std::vector<double> wide(a.begin(), a.end());
  return eval::rel_error(wide, b);
}

double tolerance_for(DType storage) { return storage == DType::kF32 ? 1e-5 : 1e-2; }

Result<std::vector<CheckRow>> decode_check(const AhbmConfig& cfg, const CheckOptions& opts) {
  std::vector<CheckRow> rows;
  for (size_t ci = 0; ci < opts.contexts.size(); ++ci) {
    const int64_t context = opts.contexts[ci];
    // One draw per context, shared by every N and storage: only the placement differs.
    const GlobalInputs g = random_global(opts.dims, context, opts.seed + ci);
    Result<std::vector<double>> ref = oracle_decode(g);
    if (!ref) return ref.take_error().context("ahbm check: the oracle at context ", context);
    for (int n : opts.n_pes) {
      for (DType storage : opts.storages) {
        const int64_t request_id = 3 + context % 5;  // start_pe = request_id mod N moves with the row
        const DecodeInputs in = place(g, storage, n, request_id);
        Result<DecodeReport> r = run_decode(cfg, in);
        if (!r) return r.take_error().context("ahbm check: context ", context, " N ", n);
        rows.push_back(row_of(n == 1 ? "decode" : "decode-sp", "", storage, n, context, 0, request_id, r->cycles,
                              rel_error(r->out, *ref)));
      }
    }
  }
  return rows;
}

Result<std::vector<CheckRow>> prefill_check(const AhbmConfig& cfg, const CheckOptions& opts) {
  std::vector<CheckRow> rows;
  uint64_t seed = opts.seed + 100;
  for (int64_t prompt : opts.prompts) {
    Status s = prefill_rows(cfg, opts, random_global(opts.prefill_dims, prompt, seed++, prompt), rows);
    if (!s) return s.take_error();
  }
  if (opts.chunk_len > 0) {
    Status s = prefill_rows(cfg, opts, random_global(opts.prefill_dims, opts.chunk_context, seed, opts.chunk_len), rows);
    if (!s) return s.take_error();
  }
  return rows;
}

}  // namespace kvf::ahbm
