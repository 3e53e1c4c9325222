// `kvforge ahbm sweep` (scenarios.h): each ADR-001 §9 tuning item and allocation choice as one
// table of simulated runs. Inputs are drawn once per (context, N) and shared by every
// configuration that runs on them; numerics are `kvforge ahbm check`'s job, not this one's.
#include <algorithm>
#include <list>

#include "scenarios/scenarios.h"
#include "exec/ahbm/decode_run.h"
#include "exec/ahbm/prefill_run.h"
#include "exec/ahbm/reference.h"

namespace kvf::bench {
namespace {

using ahbm::AhbmConfig;
using ahbm::DecodeReport;

class Sweep {
 public:
  Sweep(AhbmConfig base, uint64_t seed) : base_(base), seed_(seed) {}

  const AhbmConfig& base() const { return base_; }

  // One decode launch (N = 1: decode, N > 1: decode-sp) of Llama3-70B attention, bf16.
  Result<DecodeReport> run(const AhbmConfig& cfg, int64_t context, int n, ahbm::Mapping mapping = ahbm::Mapping::kNeighbour) {
    const std::pair<int64_t, int> key{context, n};
    auto it = std::find_if(inputs_.begin(), inputs_.end(), [&](const auto& e) { return e.first == key; });
    if (it == inputs_.end()) {
      // Two draws stay: the tables alternate between at most two shapes, and 32k x N = 8
      // alone is 256 MiB of f32 K/V.
      if (inputs_.size() == 2) inputs_.pop_front();
      inputs_.emplace_back(key, ahbm::random_inputs(dims_, DType::kBF16, context, n, 0, seed_));
      it = std::prev(inputs_.end());
    }
    ahbm::RunOptions ro;
    ro.mapping = mapping;
    return ahbm::run_decode(cfg, it->second, ro);
  }

  // One prefill launch, timing only (no values: the check table covers numerics). N = 1:
  // prefill; N > 1: the ring over shards of `layout`.
  Result<ahbm::PrefillReport> prefill(const AhbmConfig& cfg, int64_t context, int n, ahbm::ShardLayout layout) {
    const ahbm::AttnDims none{.n_heads = 0, .n_kv_heads = 0, .head_dim = dims_.head_dim};
    const ahbm::GlobalInputs g = ahbm::random_global(none, context, seed_, context);
    return ahbm::run_prefill(cfg, ahbm::place_prefill(g, dims_, DType::kBF16, n, layout, 0));
  }

  const ahbm::AttnDims& dims() const { return dims_; }

 private:
  AhbmConfig base_;
  uint64_t seed_;
  ahbm::AttnDims dims_;
  std::list<std::pair<std::pair<int64_t, int>, ahbm::DecodeInputs>> inputs_;
};

std::string num(int64_t v) { return std::to_string(v); }
std::string case_name(int64_t context, int n) {
  const std::string len = context % 1024 == 0 ? str_cat(context / 1024, "k") : std::to_string(context);
  return str_cat(n == 1 ? "decode" : "decode-sp N=" + std::to_string(n), " ", len);
}

// §9.1 and §9.4: composites in flight per PE. 1 serializes each tile's DMA behind its
// compute; on the ring the receive buffers and the state spills compete with the prefetch.
Result<AhbmSweepTable> prefetch_table(Sweep& sw, const AhbmSweepOptions& o) {
  const int64_t short_context = std::max<int64_t>(o.context / 4, 1);
  const std::string ring = str_cat("prefill-sp N=", o.n_pe, " ", o.prefill_context);
  AhbmSweepTable t{.name = "prefetch", .x = 0, .ys = {1, 3, 5}, .ylabel = "cycles / cycles at prefetch 1"};
  t.table.title = "AHBM: prefetch depth (ADR 9.1, 9.4)";
  t.table.columns = {"prefetch", "rel " + case_name(short_context, 1), "cycles " + case_name(short_context, 1),
                     "rel " + case_name(o.context, o.n_pe), "cycles " + case_name(o.context, o.n_pe),
                     "rel " + ring + " strided", "cycles " + ring + " strided"};
  std::vector<int64_t> first(3, 0);
  for (int p = 1; p <= 4; ++p) {
    AhbmConfig cfg = sw.base();
    cfg.kernel.prefetch = p;
    std::vector<int64_t> cycles;
    for (auto [context, n] : {std::pair{short_context, 1}, std::pair{o.context, o.n_pe}}) {
      Result<DecodeReport> r = sw.run(cfg, context, n);
      if (!r) return r.take_error();
      cycles.push_back(r->cycles);
    }
    Result<ahbm::PrefillReport> r = sw.prefill(cfg, o.prefill_context, o.n_pe, ahbm::ShardLayout::kStrided);
    if (!r) return r.take_error();
    cycles.push_back(r->cycles);
    std::vector<std::string> row{num(p)};
    for (size_t i = 0; i < cycles.size(); ++i) {
      if (p == 1) first[i] = cycles[i];
      row.push_back(fixed(static_cast<double>(cycles[i]) / static_cast<double>(first[i]), 3));
      row.push_back(num(cycles[i]));
    }
    t.table.rows.push_back(row);
  }
  return t;
}

// §9.3: KV tokens per composite; a tile whose buffers overflow SRAM is refused by the kernel.
Result<AhbmSweepTable> tile_table(Sweep& sw, const AhbmSweepOptions& o) {
  AhbmSweepTable t{.name = "tile", .x = 0, .ys = {2}, .log_x = true, .ylabel = "simulated cycles"};
  t.table.title = str_cat("AHBM ", case_name(o.context, o.n_pe), ": TILE size (ADR 9.3)");
  t.table.columns = {"tile", "sram_bytes_per_pe", "cycles", "dma_util", "composites", "note"};
  for (int64_t tile : {32, 64, 128, 256, 512}) {
    AhbmConfig cfg = sw.base();
    cfg.kernel.tile = tile;
    Result<DecodeReport> r = sw.run(cfg, o.context, o.n_pe);
    if (!r && r.error().code() == ErrorCode::kCapacity) {
      t.table.rows.push_back({num(tile), "-", "-", "-", "-", "refused: SRAM"});
      continue;
    }
    if (!r) return r.take_error();
    t.table.rows.push_back({num(tile), num(r->sram_bytes_per_pe), num(r->cycles), fixed(r->dma.utilization, 3),
                            num(r->composites), ""});
  }
  return t;
}

// §9.2 and §4: the tree's edges on the mesh, searched one-hop numbering vs row-major. The
// reduction's cost does not depend on the context, so a short one keeps the table cheap.
Result<AhbmSweepTable> mapping_table(Sweep& sw, const AhbmSweepOptions& o) {
  const int64_t context = std::min<int64_t>(o.context, 4096);
  AhbmSweepTable t{.name = "mapping", .x = 0, .ys = {3, 4}, .ylabel = "reduction latency (cycles)"};
  t.table.title = str_cat("AHBM decode-sp, context ", context, ": reduction tree on the PE mesh (ADR 9.2)");
  t.table.columns = {"n_pe", "tree_depth", "max_hops neighbour/naive", "reduction_cycles neighbour",
                     "reduction_cycles naive", "link_bytes neighbour", "link_bytes naive", "cycles neighbour",
                     "cycles naive"};
  for (int n : {2, 3, 4, 8}) {
    if (n > sw.base().hw.pes_per_cube()) continue;
    Result<DecodeReport> good = sw.run(sw.base(), context, n, ahbm::Mapping::kNeighbour);
    if (!good) return good.take_error();
    Result<DecodeReport> naive = sw.run(sw.base(), context, n, ahbm::Mapping::kNaive);
    if (!naive) return naive.take_error();
    t.table.rows.push_back({num(n), num(good->tree_depth), str_cat(good->max_edge_hops, "/", naive->max_edge_hops),
                            num(good->reduction_cycles), num(naive->reduction_cycles), num(good->ipcq.link_bytes),
                            num(naive->ipcq.link_bytes), num(good->cycles), num(naive->cycles)});
  }
  return t;
}

// §5.2: the G query rows of a KV head sharing each K/V tile, against one stream per row.
Result<AhbmSweepTable> gqa_table(Sweep& sw, const AhbmSweepOptions& o) {
  AhbmSweepTable t{.name = "gqa", .x = 0, .ys = {3, 4}, .log_x = true, .log_y = true, .ylabel = "simulated cycles"};
  t.table.title = str_cat("AHBM decode-sp N=", o.n_pe, ": GQA batching (ADR 5.2)");
  t.table.columns = {"context", "kv_dma_bytes batched", "kv_dma_bytes unbatched", "cycles batched", "cycles unbatched",
                     "bytes ratio", "time ratio"};
  AhbmConfig off = sw.base();
  off.kernel.gqa_batch = false;
  for (int64_t context : {std::max<int64_t>(o.context / 8, 1), o.context}) {
    Result<DecodeReport> on = sw.run(sw.base(), context, o.n_pe);
    if (!on) return on.take_error();
    Result<DecodeReport> un = sw.run(off, context, o.n_pe);
    if (!un) return un.take_error();
    const int64_t b_on = on->dma_k_bytes + on->dma_v_bytes, b_un = un->dma_k_bytes + un->dma_v_bytes;
    t.table.rows.push_back({num(context), num(b_on), num(b_un), num(on->cycles), num(un->cycles),
                            fixed(static_cast<double>(b_un) / static_cast<double>(b_on), 2),
                            fixed(static_cast<double>(un->cycles) / static_cast<double>(on->cycles), 2)});
  }
  return t;
}

// KV heads whose cache a cube must hold when query head (h, g) runs on cube g mod cubes.
int64_t kv_heads_per_cube_by_query_head(const ahbm::AttnDims& d, int cubes) {
  int64_t most = 0;
  for (int c = 0; c < cubes; ++c) {
    int64_t heads = 0;
    for (int64_t h = 0; h < d.n_kv_heads; ++h) {
      bool here = false;
      for (int64_t g = 0; g < d.group(); ++g) here = here || (g % cubes == c);
      heads += here ? 1 : 0;
    }
    most = std::max(most, heads);
  }
  return most;
}

// ADR §0 "one query head per CUBE" against §5.2's group batched on one PE stream. On a cube
// the first runs G one-row streams, each reading its own KV head's copy, which is the
// unbatched kernel's work per PE; the second runs one G-row stream over one KV head.
Result<AhbmSweepTable> allocation_table(Sweep& sw, const AhbmSweepOptions& o) {
  AhbmSweepTable t{.name = "allocation", .x = 0, .ys = {3}, .log_y = true, .boxes = true, .ylabel = "simulated cycles"};
  t.table.title = str_cat("AHBM ", case_name(o.context, o.n_pe), ": allocation policy");
  t.table.columns = {"policy", "kv_dma_bytes", "kv_resident_bytes_per_cube", "cycles", "simulated_us"};
  const ahbm::AttnDims& d = sw.dims();
  const int cubes = sw.base().hw.cubes;
  const int64_t head_bytes = 2 * o.context * d.head_dim * 2;  // K and V, bf16
  const int64_t batched_heads = (d.n_kv_heads + cubes - 1) / cubes;
  AhbmConfig off = sw.base();
  off.kernel.gqa_batch = false;
  for (bool per_cube : {false, true}) {
    Result<DecodeReport> r = sw.run(per_cube ? off : sw.base(), o.context, o.n_pe);
    if (!r) return r.take_error();
    const int64_t heads = per_cube ? kv_heads_per_cube_by_query_head(d, cubes) : batched_heads;
    t.table.rows.push_back({per_cube ? "query-head-per-CUBE" : "group-batched-per-PE-stream",
                            num(r->dma_k_bytes + r->dma_v_bytes), num(heads * head_bytes), num(r->cycles),
                            fixed(r->simulated_us, 2)});
  }
  return t;
}

// §5.3 and §6: the reduction after the last sweep, against the whole step, at batch 1. The
// same run with a one-cycle poll and spin bounds what a hardware pop-as-dependency could
// save: it removes the polling, not the transfers and merges.
Result<AhbmSweepTable> reduction_table(Sweep& sw, const AhbmSweepOptions& o) {
  AhbmSweepTable t{.name = "reduction", .x = 0, .ys = {3}, .log_x = true, .ylabel = "reduction share of the step"};
  t.table.title = str_cat("AHBM decode-sp N=", o.n_pe, " batch 1: reduction hidden or exposed (ADR 5.3, 6)");
  t.table.columns = {"context", "cycles", "reduction_cycles", "reduction_share", "poll_on_critical_path", "spins",
                     "dma_util", "reduction_cycles 1-cycle poll", "pop could save"};
  AhbmConfig fast = sw.base();
  fast.hw.ipcq.poll_cycles = 1;
  fast.hw.ipcq.spin_cycles = 1;
  for (int64_t context = 128; context <= o.max_context; context *= 4) {
    Result<DecodeReport> r = sw.run(sw.base(), context, o.n_pe);
    if (!r) return r.take_error();
    Result<DecodeReport> f = sw.run(fast, context, o.n_pe);
    if (!f) return f.take_error();
    const double cycles = static_cast<double>(r->cycles);
    t.table.rows.push_back({num(context), num(r->cycles), num(r->reduction_cycles),
                            fixed(static_cast<double>(r->reduction_cycles) / cycles, 4),
                            r->poll_on_critical_path ? "yes" : "no", num(r->spins), fixed(r->dma.utilization, 3),
                            num(f->reduction_cycles), fixed(static_cast<double>(r->cycles - f->cycles) / cycles, 4)});
  }
  return t;
}

// §5.5: the causal ring skip. A step whose KV shard lies wholly after the rank's queries
// is not enqueued; that needs contiguous shards, whose last rank then does every step
// while the first waits. Strided shards skip no step but balance the work.
Result<AhbmSweepTable> ring_table(Sweep& sw, const AhbmSweepOptions& o) {
  AhbmSweepTable t{.name = "ring", .x = 0, .ys = {3, 6}, .ylabel = "speed-up over prefill on one PE"};
  t.table.title = str_cat("AHBM prefill-sp ", o.prefill_context, " tokens: causal ring skip and shard layout (ADR 5.5)");
  t.table.columns = {"n_pe", "steps", "skipped contiguous", "speedup contiguous", "cycles contiguous",
                     "skipped strided", "speedup strided", "cycles strided", "max_ring_hops"};
  Result<ahbm::PrefillReport> one = sw.prefill(sw.base(), o.prefill_context, 1, ahbm::ShardLayout::kContiguous);
  if (!one) return one.take_error();
  t.table.rows.push_back({"1", "-", "-", "1.00", num(one->cycles), "-", "1.00", num(one->cycles), "0"});
  for (int n : {2, 3, 4, 8}) {
    if (n > sw.base().hw.pes_per_cube()) continue;
    std::vector<std::string> row{num(n)};
    for (ahbm::ShardLayout layout : {ahbm::ShardLayout::kContiguous, ahbm::ShardLayout::kStrided}) {
      Result<ahbm::PrefillReport> r = sw.prefill(sw.base(), o.prefill_context, n, layout);
      if (!r) return r.take_error();
      if (layout == ahbm::ShardLayout::kContiguous) row.push_back(num(r->steps));
      row.push_back(fixed(r->step_skip_fraction(), 4));
      row.push_back(fixed(static_cast<double>(one->cycles) / static_cast<double>(r->cycles), 2));
      row.push_back(num(r->cycles));
      if (layout == ahbm::ShardLayout::kStrided) row.push_back(num(r->max_ring_hops));
    }
    t.table.rows.push_back(row);
  }
  return t;
}

}  // namespace

Result<std::vector<AhbmSweepTable>> ahbm_sweep_scenario(const AhbmSweepOptions& o) {
  AhbmConfig base;
  if (!o.config.empty()) {
    Result<AhbmConfig> loaded = ahbm::load_config(o.config);
    if (!loaded) return loaded.take_error();
    base = *loaded;
  }
  if (o.n_pe < 2) return invalid_input("ahbm sweep: --n-pe must be at least 2 (the decode-sp group)");
  if (o.context < 1 || o.prefill_context < 1) return invalid_input("ahbm sweep: contexts must be at least 1");
  Sweep sw(base, o.seed);
  std::vector<AhbmSweepTable> out;
  using Maker = Result<AhbmSweepTable> (*)(Sweep&, const AhbmSweepOptions&);
  const std::pair<const char*, Maker> tables[] = {
      {"prefetch", prefetch_table}, {"tile", tile_table}, {"mapping", mapping_table},  {"gqa", gqa_table},
      {"allocation", allocation_table}, {"ring", ring_table}, {"reduction", reduction_table}};
  for (const std::string& name : o.only) {
    if (std::none_of(std::begin(tables), std::end(tables), [&](const auto& t) { return name == t.first; })) {
      return invalid_input("ahbm sweep: no table named ", name);
    }
  }
  for (const auto& [name, make] : tables) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), name) == o.only.end()) continue;
    Result<AhbmSweepTable> t = make(sw, o);
    if (!t) return t.take_error();
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace kvf::bench
