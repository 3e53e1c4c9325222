// `kvforge ahbm`: the AHBM memory-cube simulator (src/exec/ahbm/, docs/ahbm.md). `run` simulates
// one decode launch of Llama3-70B attention and reports simulated time, bytes, utilization,
// IPCQ traffic and the reduction; `check` runs the decode numerics table against the oracle.
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
  bool no_gqa_batch = false;
  bool json = false;
};

struct RunOptions {
  Common common;
  std::string kase = "decode";
  int64_t context = 4096;
  int n_pe = 0;  // 0: 1 for decode, 8 for decode-sp
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
  if (c.no_gqa_batch) cfg.kernel.gqa_batch = false;
  return cfg;
}

json unit_json(const ahbm::UnitTotals& u, const char* amount) {
  json j{{"busy_cycles", u.busy}, {"utilization", u.utilization}};
  if (amount) j[amount] = u.amount;
  return j;
}

json report_json(const ahbm::DecodeReport& r) {
  json stages;  // pop and branch are listed to show they stay zero
  for (size_t op = 0; op < r.stages.size(); ++op) stages[ahbm::stage_op_name(static_cast<ahbm::StageOp>(op))] = r.stages[op];
  return {
      {"composite_stages", stages},
      {"simulated_cycles", r.cycles},
      {"simulated_us", r.simulated_us},
      {"events", r.events},
      {"active_pes", r.active_pes},
      {"composites", r.composites},
      {"mask_tiles", r.mask_tiles},
      {"sram_bytes_per_pe", r.sram_bytes_per_pe},
      {"dma_bytes", {{"k", r.dma_k_bytes}, {"v", r.dma_v_bytes}, {"o_store", r.dma_o_bytes}}},
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
      {"reduction",
       {{"tree_depth", r.tree_depth},
        {"max_edge_hops", r.max_edge_hops},
        {"latency_cycles", r.reduction_cycles},
        {"poll_on_critical_path", r.poll_on_critical_path},
        {"polls", r.polls},
        {"poll_hits", r.poll_hits},
        {"spins", r.spins},
        {"spin_cycles", r.spin_cycles}}},
  };
}

Status run(const RunOptions& o) {
  const auto t0 = Clock::now();
  if (o.kase == "prefill" || o.kase == "prefill-sp") {
    return unsupported("ahbm run --case ", o.kase, ": not built yet (decode and decode-sp are; docs/ahbm.md)");
  }
  const int n = o.n_pe > 0 ? o.n_pe : (o.kase == "decode" ? 1 : 8);
  if (o.kase == "decode" && n != 1) return invalid_input("--case decode runs on one PE (no SP); use --case decode-sp for --n-pe ", n);
  if (o.kase == "decode-sp" && n < 2) return invalid_input("--case decode-sp splits the KV over --n-pe >= 2 PEs");
  if (o.context < 1) return invalid_input("--context: expected at least 1 token");
  Result<ahbm::AhbmConfig> cfg = config_of(o.common);
  if (!cfg) return cfg.take_error();
  const DType storage = o.storage == "f32" ? DType::kF32 : DType::kBF16;
  const ahbm::AttnDims dims;
  const ahbm::DecodeInputs in = ahbm::random_inputs(dims, storage, o.context, n, o.request_id, o.seed);
  const double inputs_s = seconds_since(t0);

  const auto t1 = Clock::now();
  ahbm::RunOptions ro;
  ro.mapping = o.mapping == "naive" ? ahbm::Mapping::kNaive : ahbm::Mapping::kNeighbour;
  Result<ahbm::DecodeReport> r = ahbm::run_decode(*cfg, in, ro);
  if (!r) return r.take_error();
  const double simulate_s = seconds_since(t1);

  json j{{"case", o.kase},
         {"context", o.context},
         {"n_pe", n},
         {"request_id", o.request_id},
         {"start_pe", in.geom.start_pe},
         {"heads", {{"q", dims.n_heads}, {"kv", dims.n_kv_heads}, {"head_dim", dims.head_dim}}},
         {"storage", o.storage},
         {"tile", cfg->kernel.tile},
         {"prefetch", cfg->kernel.prefetch},
         {"gqa_batch", cfg->kernel.gqa_batch},
         {"mapping", o.mapping},
         {"config", json::parse(ahbm::config_json(*cfg), nullptr, false)}};
  j.update(report_json(*r));
  if (!o.no_verify) {
    const auto t2 = Clock::now();
    const double err = ahbm::rel_error(r->out, ahbm::direct_decode(in));
    j["numerics"] = {{"rel_error_vs_f64", err}, {"tolerance", ahbm::tolerance_for(storage)},
                     {"pass", err <= ahbm::tolerance_for(storage)}, {"wall_s", seconds_since(t2)}};
  }
  j["wall_s"] = {{"inputs", inputs_s}, {"simulate", simulate_s}, {"total", seconds_since(t0)}};
  if (o.common.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s N=%d context %lld: %lld cycles (%.2f us), reduction %lld cycles, poll on critical path: %s\n",
                o.kase.c_str(), n, static_cast<long long>(o.context), static_cast<long long>(r->cycles), r->simulated_us,
                static_cast<long long>(r->reduction_cycles), r->poll_on_critical_path ? "yes" : "no");
    std::printf("%s\n", j.dump(2).c_str());
  }
  if (j.contains("numerics") && !j["numerics"]["pass"].get<bool>()) {
    return Error(ErrorCode::kValidation, str_cat("ahbm run: O differs from the f64 reference by ", j["numerics"]["rel_error_vs_f64"].get<double>()));
  }
  return {};
}

Status check(const Common& c) {
  Result<ahbm::AhbmConfig> cfg = config_of(c);
  if (!cfg) return cfg.take_error();
  const auto t0 = Clock::now();
  Result<std::vector<ahbm::CheckRow>> rows = ahbm::decode_check(*cfg, {});
  if (!rows) return rows.take_error();
  int failed = 0;
  json table = json::array();
  if (!c.json) std::printf("%-10s %-5s %3s %8s %5s %12s %9s %10s %s\n", "case", "store", "N", "context", "req", "rel_error", "tol", "cycles", "");
  for (const ahbm::CheckRow& r : *rows) {
    failed += r.pass ? 0 : 1;
    const std::string store(dtype_name(r.storage));
    if (c.json) {
      table.push_back({{"case", r.kase}, {"storage", store}, {"n_pe", r.n}, {"context", r.context},
                       {"request_id", r.request_id}, {"rel_error", r.rel_error}, {"tolerance", r.tolerance},
                       {"cycles", r.cycles}, {"pass", r.pass}});
    } else {
      std::printf("%-10s %-5s %3d %8lld %5lld %12.3e %9.0e %10lld %s\n", r.kase.c_str(), store.c_str(), r.n,
                  static_cast<long long>(r.context), static_cast<long long>(r.request_id), r.rel_error, r.tolerance,
                  static_cast<long long>(r.cycles), r.pass ? "ok" : "FAIL");
    }
  }
  if (c.json) std::printf("%s\n", json{{"rows", table}, {"failed", failed}, {"wall_s", seconds_since(t0)}}.dump().c_str());
  else std::printf("%zu rows, %d failed (prefill and prefill-sp: not built yet)\n", rows->size(), failed);
  if (failed > 0) return Error(ErrorCode::kValidation, str_cat("ahbm check: ", failed, " of ", rows->size(), " rows exceed their tolerance"));
  return {};
}

void add_common(CLI::App& cmd, Common& c) {
  cmd.add_option("--config", c.config, "hardware JSON (like src/exec/ahbm/default_config.json; defaults otherwise)");
  cmd.add_option("--tile", c.tile, "KV tokens per composite (default: the config's)")->check(CLI::PositiveNumber);
  cmd.add_option("--prefetch", c.prefetch, "composites in flight per PE (default: the config's)")->check(CLI::Range(1, 64));
  cmd.add_flag("--no-gqa-batch", c.no_gqa_batch, "one query row per composite stream (loads each K/V tile G times)");
  cmd.add_flag("--json", c.json, "print JSON");
}

}  // namespace

Command add_ahbm_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("ahbm", "AHBM memory-cube simulator: the ADR-001 attention kernel (docs/ahbm.md)");
  cmd->require_subcommand(1);
  auto run_fn = std::make_shared<std::function<Status()>>();

  auto ro = std::make_shared<RunOptions>();
  CLI::App* r = cmd->add_subcommand("run", "Simulate one decode launch of Llama3-70B attention (Hq 64, Hkv 8, d 128)");
  r->add_option("--case", ro->kase,
                "decode (one PE per KV head) | decode-sp (KV split over N PEs + log-sum-exp tree); "
                "prefill and prefill-sp are not built yet and are refused")
      ->capture_default_str()
      ->check(CLI::IsMember({"decode", "decode-sp", "prefill", "prefill-sp"}));
  r->add_option("--context", ro->context, "tokens in the KV cache")->capture_default_str();
  r->add_option("--n-pe", ro->n_pe, "PEs per reduction group (default 1 for decode, 8 for decode-sp)")->check(CLI::Range(1, 64));
  r->add_option("--request-id", ro->request_id, "start_pe = request_id mod N")->capture_default_str()->check(CLI::NonNegativeNumber);
  r->add_option("--storage", ro->storage, "K/V/Q storage type")->capture_default_str()->check(CLI::IsMember({"bf16", "f32"}));
  r->add_option("--mapping", ro->mapping, "tree ranks on the mesh: neighbour (one-hop pairs) | naive (row-major)")
      ->capture_default_str()
      ->check(CLI::IsMember({"neighbour", "naive"}));
  r->add_option("--seed", ro->seed, "random Q, K, V")->capture_default_str();
  r->add_flag("--no-verify", ro->no_verify, "skip the float64 reference check of O");
  add_common(*r, ro->common);
  r->callback([=] { *run_fn = [=] { return run(*ro); }; });

  auto co = std::make_shared<Common>();
  CLI::App* c = cmd->add_subcommand("check", "Decode numerics table vs the oracle: N in {1,2,3,4,8}, ragged contexts, f32 and bf16");
  add_common(*c, *co);
  c->callback([=] { *run_fn = [=] { return check(*co); }; });

  return {cmd, [run_fn]() -> Status { return *run_fn ? (*run_fn)() : invalid_input("ahbm: no command"); }};
}

}  // namespace kvf::cli
