// The decode numerics table (check.h).
#include "exec/ahbm/check.h"

#include "eval/compare.h"

namespace kvf::ahbm {

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
        CheckRow row{n == 1 ? "decode" : "decode-sp", storage, n, context, request_id, 0, tolerance_for(storage), r->cycles, false};
        row.rel_error = rel_error(r->out, *ref);
        row.pass = row.rel_error <= row.tolerance;
        rows.push_back(row);
      }
    }
  }
  return rows;
}

}  // namespace kvf::ahbm
