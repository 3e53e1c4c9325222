// --attention-on and the AHBM cycle report, --cp and its key count (attention_on.h).
#include "cli/attention_on.h"

#include <cstdio>
#include <numeric>

#include "llm/kv/block_pool.h"

namespace kvf::cli {

void add_attention_on_options(CLI::App& cmd, AttentionOnOptions& o) {
  cmd.add_option("--attention-on", o.target,
                 "where one-token (decode) steps run their Attention eqns: cpu, or ahbm (the memory-cube simulator "
                 "running ADR-001's decode kernel; a longer prompt's prefill and every other eqn stay on the CPU; "
                 "prints the simulated "
                 "attention cycles per decode token; a model whose attention that kernel does not cover is refused)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "ahbm"}));
  cmd.add_option("--ahbm-n-pe", o.n_pe, "AHBM: PEs per KV head (N), the keys placed round-robin over them (default 1)")
      ->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--ahbm-config", o.config,
                 "AHBM: hardware config JSON shaped like src/exec/ahbm/default_config.json (default: built in)");
  cmd.add_option("--ahbm-storage", o.storage,
                 "AHBM: the PEs' Q/K/V type: bf16 (the target, default) or f32 (matches the CPU's logits to 1e-5)")
      ->check(CLI::IsMember({"bf16", "f32"}));
  cmd.add_option("--ahbm-request-id", o.request_id, "AHBM: request id r, the first key on PE r mod N (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--cp", o.cp,
                 "context parallel over N ranks (1: off): every step's attention computed as if the sequence's KV "
                 "cache were spread over N ranks by position (16-token blocks dealt round-robin): a decode step's "
                 "as each rank's partial attention over its own keys, the prompt's prefill by ring attention (key "
                 "blocks passed round the ranks, a query's future blocks skipped), the partials merged by "
                 "log-sum-exp, giving the one-device answer. On the CPU the ranks run one after another in plain "
                 "loops over one cache: it checks the sharding and the merge, it is slower than the CPU kernel. With "
                 "--device cuda: N GPU ranks (rank r on GPU r over NCCL where N GPUs are visible; on one GPU the "
                 "ranks share it and meet on the host, a check, not a speed-up), each holding the whole model and "
                 "cache and running every step, each decode attention over its own keys, the partials gathered and "
                 "merged; the prefill runs whole on every rank; it needs --kv-type f16. Not with --attention-on ahbm, "
                 "--executor oracle or --tp above 1")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
}

Result<std::unique_ptr<ahbm::AhbmAttention>> attention_target(const AttentionOnOptions& o, const std::string& executor) {
  if (o.target != "ahbm") {
    if (o.n_pe != 0 || !o.config.empty() || !o.storage.empty() || o.request_id >= 0) {
      return invalid_input("--ahbm-n-pe, --ahbm-config, --ahbm-storage and --ahbm-request-id need --attention-on ahbm");
    }
    return std::unique_ptr<ahbm::AhbmAttention>();
  }
  if (executor != "cpu") return invalid_input("--attention-on ahbm needs --executor cpu (the host runs the other eqns)");
  ahbm::TargetOptions t;
  if (!o.config.empty()) {
    Result<ahbm::AhbmConfig> c = ahbm::load_config(o.config);
    if (!c) return c.take_error();
    t.config = *c;
  }
  t.n_pe = o.n_pe > 0 ? o.n_pe : 1;
  t.storage = o.storage == "f32" ? DType::kF32 : DType::kBF16;
  t.request_id = o.request_id >= 0 ? o.request_id : 0;
  return ahbm::AhbmAttention::create(t);
}

Result<std::unique_ptr<exec::ContextParallelAttention>> context_parallel(const AttentionOnOptions& o,
                                                                         const std::string& executor,
                                                                         const std::string& device, int tp) {
  if (o.cp == 1) return std::unique_ptr<exec::ContextParallelAttention>();
  if (o.target != "cpu") {
    return invalid_input("--cp ", o.cp, " and --attention-on ", o.target, " both place decode attention; pick one");
  }
  if (executor != "cpu") return invalid_input("--cp ", o.cp, " needs --executor cpu (the host runs the other eqns)");
  if (tp > 1) {
    return invalid_input("--cp ", o.cp, " and --tp ", tp, ": context-parallel decode serves one runner, not a "
                         "tensor-parallel group");
  }
  if (device == "cuda") return std::unique_ptr<exec::ContextParallelAttention>();  // a group of GPU ranks instead
  return exec::ContextParallelAttention::create(o.cp, llm::kv::kBlockTokens);
}

nlohmann::json context_parallel_json(const exec::ContextParallelAttention* cp) {
  if (cp == nullptr) return nullptr;
  return {{"ranks", cp->shards().ranks}, {"block_tokens", cp->shards().block_tokens},
          {"keys_per_rank", cp->stats().keys}, {"ring_pairs", cp->stats().pairs}};
}

std::string context_parallel_line(const exec::ContextParallelAttention* cp) {
  if (cp == nullptr) return "";
  std::string keys;
  for (int64_t k : cp->stats().keys) keys += str_cat(keys.empty() ? "" : " ", k);
  return str_cat("kvforge: context-parallel attention over ", cp->shards().ranks, " ranks (",
                 cp->shards().block_tokens, "-token blocks round-robin): ", cp->stats().rows, " rows merged, ",
                 cp->stats().pairs, " ring prefill block pairs; keys per rank, summed over layers and steps: ", keys);
}

nlohmann::json TokenCycles::json() const {
  if (!target_) return nullptr;
  const ahbm::TargetOptions& t = target_->options();
  const ahbm::Cycle total = std::accumulate(per_token_.begin(), per_token_.end(), ahbm::Cycle{0});
  const double mean = per_token_.empty() ? 0 : static_cast<double>(total) / static_cast<double>(per_token_.size());
  nlohmann::json j{{"n_pe", t.n_pe},
                   {"storage", dtype_name(t.storage)},
                   {"request_id", t.request_id},
                   {"decode_tokens", per_token_.size()},
                   {"launches", target_->stats().launches},
                   {"cycles_per_token", {{"mean", mean}, {"first", per_token_.empty() ? 0 : per_token_.front()},
                                         {"last", per_token_.empty() ? 0 : per_token_.back()}}},
                   {"us_per_token", mean / (t.config.hw.clock_ghz * 1e3)}};
  return j;
}

std::string TokenCycles::line() const {
  if (!target_) return "";
  const nlohmann::json j = json();
  const ahbm::TargetOptions& t = target_->options();
  if (per_token_.empty()) {
    return str_cat("kvforge: ahbm attention (N = ", t.n_pe, ", ", dtype_name(t.storage),
                   "): no decode step ran (the prefill runs on the CPU)");
  }
  char us[32];
  std::snprintf(us, sizeof us, "%.3f", j["us_per_token"].get<double>());
  return str_cat("kvforge: ahbm attention (N = ", t.n_pe, ", ", dtype_name(t.storage), ", request ", t.request_id,
                 "): ", per_token_.size(), " decode tokens, ", target_->stats().launches,
                 " launches; simulated attention cycles per token: mean ",
                 static_cast<int64_t>(j["cycles_per_token"]["mean"].get<double>() + 0.5), " (", us, " us at ",
                 t.config.hw.clock_ghz, " GHz), first ", per_token_.front(), ", last ", per_token_.back());
}

}  // namespace kvf::cli
