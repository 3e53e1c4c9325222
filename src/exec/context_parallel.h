// Context-parallel (KV-parallel) decode attention as an AttentionBackend (attention_backend.h):
// each batch row's visible keys are split by owner over N ranks (plan/kv_shards.h: 16-token
// blocks dealt round-robin), each rank's partial attention and log-sum-exp is computed over
// its keys alone, and the partials are merged exactly (exec/cpu/attention_merge.h). On one
// host the K/V are not split in memory and the ranks run one after another in plain loops:
// this shows that a sequence spread over N ranks gives the single-device answer, and is the
// arithmetic a multi-GPU path reuses. It is not fast; the CPU kernel is exec/cpu/attention.h.
#pragma once

#include <memory>
#include <vector>

#include "exec/attention_backend.h"
#include "plan/kv_shards.h"

namespace kvf::exec {

// Summed over every run since creation (or reset_stats).
struct ContextParallelStats {
  int64_t eqns = 0;          // Attention eqns run
  int64_t rows = 0;          // (eqn, batch row) pairs: one merge per query head of each
  std::vector<int64_t> keys;  // [ranks]: visible keys each rank held, summed over rows
};

class ContextParallelAttention final : public AttentionBackend {
 public:
  // ranks >= 1 over blocks of block_tokens positions (kInvalidInput otherwise).
  static Result<std::unique_ptr<ContextParallelAttention>> create(int ranks, int64_t block_tokens);

  std::string name() const override { return "context-parallel"; }
  // Static refusals (kUnsupported): more than one query row per head (a prefill or a chunk:
  // a long prefill shards by the ring schedule, plan::ring_pairs, which this backend does not
  // run), and a KV cache other than f32 or f16. Every key form and score transform the CPU
  // kernel takes is covered: dense or paged keys, split (MLA) keys, softcap, any additive
  // mask (ALiBi, windows, sinks: a masked key adds nothing on whichever rank holds it).
  Status check(const plan::AttentionRequest& r, int index) override;
  // For each batch row: the keys below its live length split by owner, one partial per rank
  // and query head, merged. A row with no visible key is zeros, as on the CPU kernel.
  Status run(const AttentionArgs& a, int index) override;

  const plan::KvShards& shards() const { return shards_; }
  const ContextParallelStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; stats_.keys.assign(static_cast<size_t>(shards_.ranks), 0); }

 private:
  explicit ContextParallelAttention(plan::KvShards shards) : shards_(shards) { reset_stats(); }
  void run_row(const AttentionArgs& a, int64_t b);

  plan::KvShards shards_;
  ContextParallelStats stats_;
  std::vector<std::vector<int64_t>> rank_keys_;  // [ranks][keys]: the split of split_keys_ keys
  int64_t split_keys_ = -1;
  std::vector<float> o_, lse_;                   // [ranks, dv], [ranks]: one head's partials
};

}  // namespace kvf::exec
