// `kvforge ahbm`: the AHBM memory-cube simulator (src/exec/ahbm/, docs/ahbm.md). `run` simulates
// one decode or prefill launch of Llama3-70B attention and reports simulated time, bytes,
// utilization, IPCQ traffic, the reduction or the ring; `check` runs the numerics table of
// all four cases against the oracle.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "exec/ahbm/check.h"

namespace kvf::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Common {
  std::string config;
  int64_t tile = 0;  // 0: the config's
  int prefetch = 0;
  int64_t q_block = 0;
  bool no_gqa_batch = false;
  bool json = false;
};

struct RunOptions {
  Common common;
  std::string kase = "decode";
  int64_t context = 4096;
  int n_pe = 0;  // 0: 1 for decode and prefill, 8 for decode-sp and prefill-sp
  int64_t q_start = 0;
  std::string shards = "contiguous";
  int64_t verify_heads = 1;
  int64_t request_id = 0;
  std::string storage = "bf16";
  std::string mapping = "neighbour";
  uint64_t seed = 1;
  bool no_verify = false;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Result<ahbm::AhbmConfig> config_of(const Common& c) {
  ahbm::AhbmConfig cfg;
  if (!c.config.empty()) {
    Result<ahbm::AhbmConfig> loaded = ahbm::load_config(c.config);
    if (!loaded) return loaded.take_error();
    cfg = *loaded;
  }
  if (c.tile > 0) cfg.kernel.tile = c.tile;
  if (c.prefetch > 0) cfg.kernel.prefetch = c.prefetch;
  if (c.q_block > 0) cfg.kernel.q_block = c.q_block;
  if (c.no_gqa_batch) cfg.kernel.gqa_batch = false;
  return cfg;
}

json unit_json(const ahbm::UnitTotals& u, const char* amount) {
  json j{{"busy_cycles", u.busy}, {"utilization", u.utilization}};
  if (amount) j[amount] = u.amount;
  return j;
}

json stages_json(const std::array<int64_t, 6>& stages) {
  json j;  // pop and branch are listed to show they stay zero
  for (size_t op = 0; op < stages.size(); ++op) j[ahbm::stage_op_name(static_cast<ahbm::StageOp>(op))] = stages[op];
  return j;
}

json totals_json(const ahbm::RunTotals& r) {
  return {
      {"composite_stages", stages_json(r.stages)},
      {"simulated_cycles", r.cycles},
      {"simulated_us", r.simulated_us},
      {"events", r.events},
      {"active_pes", r.active_pes},
      {"composites", r.composites},
      {"sram_bytes_per_pe", r.sram_bytes_per_pe},
      {"units",
       {{"dma", unit_json(r.dma, "bytes")},
        {"mm", unit_json(r.mm, "macs")},
        {"vec", unit_json(r.vec, "elements")},
        {"ctl", unit_json(r.ctl, nullptr)},
        {"ipcq_links", unit_json(r.link, "bytes")}}},
      {"ipcq",
       {{"messages", r.ipcq.messages},
        {"bytes", r.ipcq.bytes},
        {"link_bytes", r.ipcq.link_bytes},
        {"max_hops", r.ipcq.max_hops},
        {"backpressure_stall_cycles", r.ipcq.stall_cycles}}},
  };
}

json report_json(const ahbm::DecodeReport& r) {
  json j = totals_json(r);
  j["mask_tiles"] = r.mask_tiles;
  j["dma_bytes"] = {{"k", r.dma_k_bytes}, {"v", r.dma_v_bytes}, {"o_store", r.dma_o_bytes}};
  j["reduction"] = {{"tree_depth", r.tree_depth},
                    {"max_edge_hops", r.max_edge_hops},
                    {"latency_cycles", r.reduction_cycles},
                    {"poll_on_critical_path", r.poll_on_critical_path},
                    {"polls", r.polls},
                    {"poll_hits", r.poll_hits},
                    {"spins", r.spins},
                    {"spin_cycles", r.spin_cycles}};
  return j;
}

json report_json(const ahbm::PrefillReport& r) {
  json j = totals_json(r);
  j["tiles"] = {{"enqueued", r.tiles}, {"skipped_all_future", r.tiles_skipped}, {"masked", r.mask_tiles}};
  j["dma_bytes"] = {{"q", r.dma_q_bytes},         {"k", r.dma_k_bytes},          {"v", r.dma_v_bytes},
                    {"state", r.dma_state_bytes}, {"ring", r.ring_dma_bytes},    {"o_store", r.dma_o_bytes}};
  j["compute_end_cycles"] = r.compute_end;
  j["ring"] = {{"steps", r.steps},
               {"steps_skipped", r.steps_skipped},
               {"step_skip_fraction", r.step_skip_fraction()},
               {"entries", r.ring_entries},
               {"bytes", r.ring_bytes},
               {"max_hops", r.max_ring_hops},
               {"max_recv_buffers_in_use", r.max_recv_buffers},
               {"backpressure_stall_cycles", r.ipcq.stall_cycles},
               {"polls", r.polls},
               {"poll_hits", r.poll_hits},
               {"spins", r.spins},
               {"spin_cycles", r.spin_cycles},
               {"max_starved_cycles", r.max_starved_cycles}};
  return j;
}

json run_header(const RunOptions& o, int n, const ahbm::AttnDims& dims, const ahbm::AhbmConfig& cfg) {
  return {{"case", o.kase},
          {"context", o.context},
          {"n_pe", n},
          {"request_id", o.request_id},
          {"heads", {{"q", dims.n_heads}, {"kv", dims.n_kv_heads}, {"head_dim", dims.head_dim}}},
          {"storage", o.storage},
          {"tile", cfg.kernel.tile},
          {"prefetch", cfg.kernel.prefetch},
          {"gqa_batch", cfg.kernel.gqa_batch},
          {"mapping", o.mapping},
          {"config", json::parse(ahbm::config_json(cfg), nullptr, false)}};
}

ahbm::Mapping mapping_of(const RunOptions& o) { return o.mapping == "naive" ? ahbm::Mapping::kNaive : ahbm::Mapping::kNeighbour; }

json numerics_json(double err, DType storage, Clock::time_point since) {
  return {{"rel_error_vs_f64", err}, {"tolerance", ahbm::tolerance_for(storage)},
          {"pass", err <= ahbm::tolerance_for(storage)}, {"wall_s", seconds_since(since)}};
}

// Prints the report with the command's own wall time; a numerics failure is the command's failure.
Status finish(const RunOptions& o, json& j, Clock::time_point t0, double inputs_s, double simulate_s, const std::string& headline) {
  j["wall_s"] = {{"inputs", inputs_s}, {"simulate", simulate_s}, {"total", seconds_since(t0)}};
  if (o.common.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n%s\n", headline.c_str(), j.dump(2).c_str());
  }
  if (j.contains("numerics") && !j["numerics"]["pass"].get<bool>()) {
    return Error(ErrorCode::kValidation, str_cat("ahbm run: O differs from the f64 reference by ", j["numerics"]["rel_error_vs_f64"].get<double>()));
  }
  return {};
}

Status run_decode(const RunOptions& o, const ahbm::AhbmConfig& cfg, int n, DType storage, Clock::time_point t0) {
  const ahbm::AttnDims dims;
  const ahbm::DecodeInputs in = ahbm::random_inputs(dims, storage, o.context, n, o.request_id, o.seed);
  const double inputs_s = seconds_since(t0);

  const auto t1 = Clock::now();
  ahbm::RunOptions ro;
  ro.mapping = mapping_of(o);
  Result<ahbm::DecodeReport> r = ahbm::run_decode(cfg, in, ro);
  if (!r) return r.take_error();
  const double simulate_s = seconds_since(t1);

  json j = run_header(o, n, dims, cfg);
  j["start_pe"] = in.geom.start_pe;
  j.update(report_json(*r));
  if (!o.no_verify) {
    const auto t2 = Clock::now();
    j["numerics"] = numerics_json(ahbm::rel_error(r->out, ahbm::direct_decode(in)), storage, t2);
  }
  return finish(o, j, t0, inputs_s, simulate_s,
                str_cat(o.kase, " N=", n, " context ", o.context, ": ", r->cycles, " cycles (", r->simulated_us,
                        " us), reduction ", r->reduction_cycles, " cycles, poll on critical path: ",
                        r->poll_on_critical_path ? "yes" : "no"));
}

// Prefill: timing for every KV head; values (and the f64 check) for the first verify_heads,
// at every stride-th query (and the last): at 4k tokens one KV head's values are 17 G MACs.
Status run_prefill(const RunOptions& o, const ahbm::AhbmConfig& cfg, int n, DType storage, Clock::time_point t0) {
  const ahbm::AttnDims dims;
  const int64_t q_len = o.context - o.q_start;
  const int64_t value_heads = o.no_verify ? 0 : std::min(o.verify_heads, dims.n_kv_heads);
  const ahbm::AttnDims drawn{.n_heads = dims.group() * value_heads, .n_kv_heads = value_heads, .head_dim = dims.head_dim};
  const ahbm::GlobalInputs g = ahbm::random_global(drawn, o.context, o.seed, q_len);
  const ahbm::ShardLayout layout = o.shards == "strided" ? ahbm::ShardLayout::kStrided : ahbm::ShardLayout::kContiguous;
  const ahbm::PrefillInputs in = ahbm::place_prefill(g, dims, storage, n, layout, o.request_id);
  const double inputs_s = seconds_since(t0);

  const auto t1 = Clock::now();
  Result<ahbm::PrefillReport> r = ahbm::run_prefill(cfg, in, {.mapping = mapping_of(o)});
  if (!r) return r.take_error();
  const double simulate_s = seconds_since(t1);

  json j = run_header(o, n, dims, cfg);
  j["q_start"] = o.q_start;
  j["q_block"] = cfg.kernel.q_block;
  if (n > 1) j["shards"] = o.shards;
  j.update(report_json(*r));
  if (!o.no_verify) {
    const auto t2 = Clock::now();
    const int64_t stride = (q_len + 511) / 512;
    const std::vector<int64_t> queries = ahbm::sampled_queries(q_len, stride);
    const std::vector<float> got = ahbm::gather_queries(r->out, value_heads * dims.group(), q_len, dims.head_dim, queries);
    j["numerics"] = numerics_json(ahbm::rel_error(got, ahbm::direct_prefill(in, value_heads, queries)), storage, t2);
    j["numerics"].update({{"kv_heads", value_heads}, {"query_stride", stride}, {"queries", queries.size()}});
  }
  return finish(o, j, t0, inputs_s, simulate_s,
                str_cat(o.kase, " N=", n, " context ", o.context, " q_start ", o.q_start, ": ", r->cycles, " cycles (",
                        r->simulated_us, " us), ring steps skipped ", r->steps_skipped, "/", r->steps));
}

Status run(const RunOptions& o) {
  const auto t0 = Clock::now();
  const bool prefill = o.kase == "prefill" || o.kase == "prefill-sp";
  const bool sp = o.kase == "decode-sp" || o.kase == "prefill-sp";
  const int n = o.n_pe > 0 ? o.n_pe : (sp ? 8 : 1);
  if (!sp && n != 1) return invalid_input("--case ", o.kase, " runs on one PE (no SP); use --case ", o.kase, "-sp for --n-pe ", n);
  if (o.kase == "decode-sp" && n < 2) return invalid_input("--case decode-sp splits the KV over --n-pe >= 2 PEs");
  if (o.kase == "prefill-sp" && n < 2) return invalid_input("--case prefill-sp runs a ring of --n-pe >= 2 PEs");
  if (o.context < 1) return invalid_input("--context: expected at least 1 token");
  if (!prefill && o.q_start != 0) return invalid_input("--q-start: only for --case prefill (a chunk continuing a prompt)");
  if (o.q_start < 0 || o.q_start >= o.context) return invalid_input("--q-start: expected 0 <= q_start < --context ", o.context);
  if (o.kase == "prefill-sp" && o.q_start != 0) return unsupported("--q-start with --case prefill-sp: the ring shards one whole prompt");
  Result<ahbm::AhbmConfig> cfg = config_of(o.common);
  if (!cfg) return cfg.take_error();
  const DType storage = o.storage == "f32" ? DType::kF32 : DType::kBF16;
  return prefill ? run_prefill(o, *cfg, n, storage, t0) : run_decode(o, *cfg, n, storage, t0);
}

Status check(const Common& c) {
  Result<ahbm::AhbmConfig> cfg = config_of(c);
  if (!cfg) return cfg.take_error();
  const auto t0 = Clock::now();
  Result<std::vector<ahbm::CheckRow>> rows = ahbm::decode_check(*cfg, {});
  if (!rows) return rows.take_error();
  Result<std::vector<ahbm::CheckRow>> prefill_rows = ahbm::prefill_check(*cfg, {});
  if (!prefill_rows) return prefill_rows.take_error();
  rows->insert(rows->end(), prefill_rows->begin(), prefill_rows->end());
  int failed = 0;
  std::vector<std::string> cases;
  json table = json::array();
  if (!c.json) {
    std::printf("%-10s %-10s %-5s %3s %8s %7s %5s %12s %9s %10s %s\n", "case", "shards", "store", "N", "context", "q_start",
                "req", "rel_error", "tol", "cycles", "");
  }
  for (const ahbm::CheckRow& r : *rows) {
    failed += r.pass ? 0 : 1;
    if (std::find(cases.begin(), cases.end(), r.kase) == cases.end()) cases.push_back(r.kase);
    const std::string store(dtype_name(r.storage));
    if (c.json) {
      table.push_back({{"case", r.kase}, {"shards", r.layout}, {"storage", store}, {"n_pe", r.n}, {"context", r.context},
                       {"q_start", r.q_start}, {"request_id", r.request_id}, {"rel_error", r.rel_error},
                       {"tolerance", r.tolerance}, {"cycles", r.cycles}, {"pass", r.pass}});
    } else {
      std::printf("%-10s %-10s %-5s %3d %8lld %7lld %5lld %12.3e %9.0e %10lld %s\n", r.kase.c_str(), r.layout.c_str(),
                  store.c_str(), r.n, static_cast<long long>(r.context), static_cast<long long>(r.q_start),
                  static_cast<long long>(r.request_id), r.rel_error, r.tolerance, static_cast<long long>(r.cycles),
                  r.pass ? "ok" : "FAIL");
    }
  }
  std::string names;
  for (const std::string& k : cases) names += (names.empty() ? "" : ", ") + k;
  if (c.json) {
    std::printf("%s\n", json{{"rows", table}, {"cases", cases}, {"failed", failed}, {"wall_s", seconds_since(t0)}}.dump().c_str());
  } else {
    std::printf("%zu rows, %d failed, %zu cases (%s), %.1f s\n", rows->size(), failed, cases.size(), names.c_str(), seconds_since(t0));
  }
  if (failed > 0) return Error(ErrorCode::kValidation, str_cat("ahbm check: ", failed, " of ", rows->size(), " rows exceed their tolerance"));
  return {};
}

void add_common(CLI::App& cmd, Common& c) {
  cmd.add_option("--config", c.config, "hardware JSON (like src/exec/ahbm/default_config.json; defaults otherwise)");
  cmd.add_option("--tile", c.tile, "KV tokens per composite (default: the config's)")->check(CLI::PositiveNumber);
  cmd.add_option("--prefetch", c.prefetch, "composites in flight per PE (default: the config's)")->check(CLI::Range(1, 64));
  cmd.add_option("--q-block", c.q_block, "prefill: query tokens per block, G x q_block rows per composite (default: the config's, 4)")
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--no-gqa-batch", c.no_gqa_batch, "one query row per composite stream (loads each K/V tile G times)");
  cmd.add_flag("--json", c.json, "print JSON");
}

}  // namespace

Command add_ahbm_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("ahbm", "AHBM memory-cube simulator: the ADR-001 attention kernel (docs/ahbm.md)");
  cmd->require_subcommand(1);
  auto run_fn = std::make_shared<std::function<Status()>>();

  auto ro = std::make_shared<RunOptions>();
  CLI::App* r = cmd->add_subcommand("run", "Simulate one decode or prefill launch of Llama3-70B attention (Hq 64, Hkv 8, d 128)");
  r->add_option("--case", ro->kase,
                "decode (one PE per KV head) | decode-sp (KV split over N PEs + log-sum-exp tree) | "
                "prefill (one PE per KV head, causal q blocks) | prefill-sp (ring attention over N PEs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"decode", "decode-sp", "prefill", "prefill-sp"}));
  r->add_option("--context", ro->context,
                "tokens in the KV cache (prefill: keys seen, q_start + the chunk). Prefill simulates G x q_block-row "
                "composites, O(S^2 / (tile x q_block)) of them: 4096 takes seconds, not minutes")
      ->capture_default_str();
  r->add_option("--n-pe", ro->n_pe, "PEs per group or ring (default 1 for decode and prefill, 8 for the -sp cases)")->check(CLI::Range(1, 64));
  r->add_option("--q-start", ro->q_start, "prefill: tokens already cached; the chunk's queries are q_start .. context - 1")
      ->capture_default_str();
  r->add_option("--shards", ro->shards, "prefill-sp: contiguous (the causal ring skip works) | strided (decode's round-robin)")
      ->capture_default_str()
      ->check(CLI::IsMember({"contiguous", "strided"}));
  r->add_option("--verify-heads", ro->verify_heads,
                "prefill: KV heads whose values are computed and checked against f64 at up to 512 sampled queries; "
                "the rest are timed only (timing never depends on values)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  r->add_option("--request-id", ro->request_id, "start_pe = request_id mod N")->capture_default_str()->check(CLI::NonNegativeNumber);
  r->add_option("--storage", ro->storage, "K/V/Q storage type")->capture_default_str()->check(CLI::IsMember({"bf16", "f32"}));
  r->add_option("--mapping", ro->mapping, "tree or ring ranks on the mesh: neighbour (one-hop pairs) | naive (row-major)")
      ->capture_default_str()
      ->check(CLI::IsMember({"neighbour", "naive"}));
  r->add_option("--seed", ro->seed, "random Q, K, V")->capture_default_str();
  r->add_flag("--no-verify", ro->no_verify, "skip the float64 reference check of O (prefill: no values at all, timing only)");
  add_common(*r, ro->common);
  r->callback([=] { *run_fn = [=] { return run(*ro); }; });

  auto co = std::make_shared<Common>();
  CLI::App* c = cmd->add_subcommand("check", "Numerics table vs the oracle for decode, decode-sp, prefill and prefill-sp: "
                                               "N in {1,2,3,4,8}, ragged lengths, f32 and bf16 (a few seconds)");
  add_common(*c, *co);
  c->callback([=] { *run_fn = [=] { return check(*co); }; });

  add_ahbm_sweep_command(*cmd, run_fn);

  return {cmd, [run_fn]() -> Status { return *run_fn ? (*run_fn)() : invalid_input("ahbm: no command"); }};
}

}  // namespace kvf::cli
