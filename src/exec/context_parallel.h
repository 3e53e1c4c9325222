// Context-parallel (KV-parallel) attention as an AttentionBackend (attention_backend.h): each
// batch row's keys are split by owner over N ranks (plan/kv_shards.h: blocks dealt round-
// robin). A decode row takes one partial attention and log-sum-exp per rank over its keys
// alone; a prefill or chunk runs the ring schedule (plan::ring_pairs), its query rows held by
// the rank of their block and the key blocks passed round the ring, pairs in a query's future
// skipped. The partials are merged exactly (exec/cpu/attention_merge.h). On one
// host the K/V are not split in memory and the ranks run one after another in plain loops:
// this shows that a sequence spread over N ranks gives the single-device answer. It is not
// fast; the CPU kernel is exec/cpu/attention.h, and GPU ranks decode over the same placement
// in exec/cuda/step/kv_parallel.cpp.
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
  int64_t pairs = 0;         // ring prefill: (query block, key block) pairs computed
  std::vector<int64_t> keys;  // [ranks]: keys each rank attended over, summed over rows or pairs
};

class ContextParallelAttention final : public AttentionBackend {
 public:
  // ranks >= 1 over blocks of block_tokens positions (kInvalidInput otherwise).
  static Result<std::unique_ptr<ContextParallelAttention>> create(int ranks, int64_t block_tokens);

  std::string name() const override { return "context-parallel"; }
  // Static refusals (kUnsupported): a KV cache other than f32 or f16, query heads that are not
  // a multiple of the KV heads. Every key form and score transform the CPU kernel takes is
  // covered: dense or paged keys, split (MLA) keys, softcap, any additive mask (ALiBi, windows,
  // sinks: a masked key adds nothing on whichever rank holds it).
  Status check(const plan::AttentionRequest& r, int index) override;
  // For each batch row: one query row per head splits the keys below its live length by owner,
  // one partial per rank and query head, merged; more query rows run the ring (run_ring). A
  // row with no visible key is zeros, as on the CPU kernel.
  Status run(const AttentionArgs& a, int index) override;

  const plan::KvShards& shards() const { return shards_; }
  const ContextParallelStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; stats_.keys.assign(static_cast<size_t>(shards_.ranks), 0); }

 private:
  explicit ContextParallelAttention(plan::KvShards shards) : shards_(shards) { reset_stats(); }
  void run_row(const AttentionArgs& a, int64_t b);
  void run_ring(const AttentionArgs& a, int64_t b);

  plan::KvShards shards_;
  ContextParallelStats stats_;
  std::vector<std::vector<int64_t>> rank_keys_;  // [ranks][keys]: the split of split_keys_ keys
  int64_t split_keys_ = -1;
  std::vector<float> o_, lse_;  // decode: [ranks, dv], [ranks], one head's partials; ring: [lq, hq, dv], [lq, hq], running
};

}  // namespace kvf::exec
