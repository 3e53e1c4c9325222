// Context-parallel decode attention on one host (context_parallel.h).
#include "exec/context_parallel.h"

#include <algorithm>

#include "exec/cpu/attention_merge.h"

namespace kvf::exec {

Result<std::unique_ptr<ContextParallelAttention>> ContextParallelAttention::create(int ranks, int64_t block_tokens) {
  Result<plan::KvShards> shards = plan::KvShards::create(ranks, block_tokens);
  if (!shards) return shards.take_error();
  return std::unique_ptr<ContextParallelAttention>(new ContextParallelAttention(*shards));
}

namespace {

// What the backend runs: one query row per head over an f32 or f16 cache of whole GQA groups.
Status covers(int64_t lq, DType kv_dtype, int64_t hq, int64_t hkv) {
  if (lq != 1) {
    return unsupported("context parallel: ", lq, " query rows per head (a prefill or a chunk): the backend runs "
                       "decode steps, one query row per head; a sharded prefill is the ring schedule, not built here");
  }
  if (kv_dtype != DType::kF32 && kv_dtype != DType::kF16) {
    return unsupported("context parallel: a ", dtype_name(kv_dtype), " KV cache (f32 or f16 expected)");
  }
  if (hkv <= 0 || hq % hkv != 0) return unsupported("context parallel: ", hq, " query heads over ", hkv, " KV heads");
  return {};
}

}  // namespace

Status ContextParallelAttention::check(const plan::AttentionRequest& r, int) {
  return covers(r.lq, r.kv_dtype, r.hq, r.hkv);
}

void ContextParallelAttention::run_row(const AttentionArgs& a, int64_t b) {
  const int64_t n = a.len != nullptr ? std::clamp<int64_t>(a.len[b], 0, a.lk) : a.lk;
  const int ranks = shards_.ranks;
  if (n != split_keys_) {  // every layer of a step, and every row of one length, splits the same keys
    rank_keys_.resize(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) rank_keys_[static_cast<size_t>(r)] = shards_.positions(r, n);
    split_keys_ = n;
  }
  for (int r = 0; r < ranks; ++r) {
    stats_.keys[static_cast<size_t>(r)] += static_cast<int64_t>(rank_keys_[static_cast<size_t>(r)].size());
  }
  o_.resize(static_cast<size_t>(ranks * a.dv));
  lse_.resize(static_cast<size_t>(ranks));
  for (int64_t h = 0; h < a.hq; ++h) {
    for (int r = 0; r < ranks; ++r) {  // each rank over its own keys only
      lse_[static_cast<size_t>(r)] =
          cpu::partial_attention(a, b, h, 0, rank_keys_[static_cast<size_t>(r)], o_.data() + r * a.dv);
    }
    cpu::merge_partials(ranks, a.dv, o_.data(), lse_.data(), a.out + (b * a.hq + h) * a.dv);
  }
  ++stats_.rows;
}

Status ContextParallelAttention::run(const AttentionArgs& a, int) {
  if (Status s = covers(a.lq, a.kv_dtype, a.hq, a.hkv); !s) {
    return internal_error("context parallel: run() on an Attention eqn that check() refuses: ", s.error().message());
  }
  ++stats_.eqns;
  for (int64_t b = 0; b < a.batch; ++b) run_row(a, b);
  return {};
}

}  // namespace kvf::exec
