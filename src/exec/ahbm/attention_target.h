// The AHBM simulator as the target of a model step's Attention eqns (exec/attention_backend.h):
// each batch row's decode attention becomes one run_decode launch of ADR-001's kernel, with
// the model's head counts and head_dim, its live keys placed round-robin over N PEs per KV
// head. Not a cache: the host's KV cache stays the truth, and every launch places the live
// keys afresh. What the decode kernel does not cover is refused (docs/ahbm.md, Placement).
#pragma once

#include <memory>
#include <set>
#include <tuple>

#include "exec/ahbm/decode_run.h"
#include "exec/attention_backend.h"

namespace kvf::ahbm {

struct TargetOptions {
  AhbmConfig config;
  int n_pe = 1;                   // N: PEs in each KV head's reduction group
  DType storage = DType::kBF16;   // the PEs' K/V buffers and MM inputs: bf16 (the target) or f32
  int64_t request_id = 0;         // batch row b is request request_id + b: start_pe = (request_id + b) mod N
};

// Summed over every launch since creation (or reset_stats).
struct TargetStats {
  int64_t eqns = 0;        // Attention eqns run
  int64_t launches = 0;    // run_decode calls: one per (eqn, batch row)
  Cycle cycles = 0;        // simulated, summed over launches (one after the other)
  int64_t keys = 0;        // context lengths, summed over launches
  int64_t dma_kv_bytes = 0;  // K and V bytes the PEs loaded
};

class AhbmAttention final : public exec::AttentionBackend {
 public:
  // Refuses an invalid config, N < 1 or a storage other than f32 and bf16 (kInvalidInput).
  static Result<std::unique_ptr<AhbmAttention>> create(TargetOptions opts);

  std::string name() const override { return "ahbm"; }
  // Static refusals (kUnsupported): more than one query row (prefill, chunks), split (MLA) or
  // paged keys, softcap, a per-head (ALiBi) mask, head widths that differ for K and V, a
  // softmax scale other than the kernel's 1/sqrt(head_dim), and shapes the config cannot
  // hold (a dry launch at this shape: SRAM, PEs per cube, IPCQ entries).
  Status check(const plan::AttentionRequest& r, int index) override;
  // One launch per batch row over its visible keys: those below its live length, of which
  // the mask must show a causal prefix (0 then -inf); anything else is kUnsupported. A row
  // with no visible key is zeros, with no launch.
  Status run(const exec::AttentionArgs& a, int index) override;

  const TargetOptions& options() const { return opts_; }
  const TargetStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  explicit AhbmAttention(TargetOptions opts) : opts_(std::move(opts)) {}
  Result<int64_t> visible_keys(const exec::AttentionArgs& a, int64_t row) const;

  TargetOptions opts_;
  TargetStats stats_;
  std::set<std::tuple<int64_t, int64_t, int64_t>> fits_;  // (hq, hkv, head_dim) a dry launch ran
};

}  // namespace kvf::ahbm
