// `--attention-on cpu|ahbm` and its --ahbm-* options: where the Attention eqns of decode
// steps run (docs/ahbm.md, Placement), and the simulated cycles each decode token cost there;
// and `--cp N`, decode attention split by position over N ranks and merged (docs/models.md,
// Context-parallel decode). The backends are exec/ahbm/attention_target.h and
// exec/context_parallel.h; this file only parses and reports.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/ahbm/attention_target.h"
#include "exec/context_parallel.h"

namespace kvf::cli {

struct AttentionOnOptions {
  std::string target = "cpu";  // cpu or ahbm
  int n_pe = 0;                // 0: not given (1)
  std::string config;          // empty: the built-in defaults
  std::string storage;         // empty: not given (bf16)
  int64_t request_id = -1;     // -1: not given (0)
  int cp = 1;                  // --cp: context-parallel ranks of decode attention (1: off)
};

void add_attention_on_options(CLI::App& cmd, AttentionOnOptions& o);

// The AHBM target the options ask for; null for --attention-on cpu. Refuses --ahbm-* flags
// without --attention-on ahbm, and a placement with the oracle executor.
Result<std::unique_ptr<ahbm::AhbmAttention>> attention_target(const AttentionOnOptions& o, const std::string& executor);

// The context-parallel backend --cp N asks for; null for N = 1 and with --device cuda (there
// the ranks are a group of GPU runners: open_generator). Refuses (kInvalidInput) --cp with
// --attention-on ahbm, the oracle executor and --tp > 1.
Result<std::unique_ptr<exec::ContextParallelAttention>> context_parallel(const AttentionOnOptions& o,
                                                                         const std::string& executor,
                                                                         const std::string& device, int tp);
// For --json: {"ranks", "block_tokens", "keys_per_rank", "ring_pairs"}; null without the backend.
nlohmann::json context_parallel_json(const exec::ContextParallelAttention* cp);
// One line for stderr: the ranks, the rows merged, the ring's block pairs and the keys each
// rank attended over, summed over layers and steps.
std::string context_parallel_line(const exec::ContextParallelAttention* cp);

// Simulated attention cycles per decode token: the target's cycle count read around each step.
class TokenCycles {
 public:
  explicit TokenCycles(const ahbm::AhbmAttention* target) : target_(target) {}
  void begin() { start_ = target_ ? target_->stats().cycles : 0; }
  void end() {
    if (target_) per_token_.push_back(target_->stats().cycles - start_);
  }
  // For --json: {"n_pe", "storage", "decode_tokens", "launches", "cycles_per_token": {mean, first, last}, "us_per_token"}.
  nlohmann::json json() const;
  // One line for stderr.
  std::string line() const;

 private:
  const ahbm::AhbmAttention* target_;
  ahbm::Cycle start_ = 0;
  std::vector<ahbm::Cycle> per_token_;
};

}  // namespace kvf::cli
