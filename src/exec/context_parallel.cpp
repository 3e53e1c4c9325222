// Context-parallel decode attention on one host (context_parallel.h).
#include "exec/context_parallel.h"

#include <algorithm>
#include <limits>

#include "exec/cpu/attention_merge.h"

namespace kvf::exec {

Result<std::unique_ptr<ContextParallelAttention>> ContextParallelAttention::create(int ranks, int64_t block_tokens) {
  Result<plan::KvShards> shards = plan::KvShards::create(ranks, block_tokens);
  if (!shards) return shards.take_error();
  return std::unique_ptr<ContextParallelAttention>(new ContextParallelAttention(*shards));
}

namespace {

// What the backend runs: query rows per head over an f32 or f16 cache of whole GQA groups.
Status covers(DType kv_dtype, int64_t hq, int64_t hkv) {
  if (kv_dtype != DType::kF32 && kv_dtype != DType::kF16) {
    return unsupported("context parallel: a ", dtype_name(kv_dtype), " KV cache (f32 or f16 expected)");
  }
  if (hkv <= 0 || hq % hkv != 0) return unsupported("context parallel: ", hq, " query heads over ", hkv, " KV heads");
  return {};
}

// The last of the first n keys that query row i of batch row b sees under the mask (under any
// head's), or -1: its position, when the mask is causal.
int64_t last_visible(const AttentionArgs& a, int64_t b, int64_t i, int64_t n) {
  if (a.mask == nullptr) return n - 1;
  const int64_t mb = a.mask_batch == 1 ? 0 : b;
  for (int64_t t = n - 1; t >= 0; --t) {
    for (int64_t h = 0; h < a.mask_heads; ++h) {
      if (a.mask[((mb * a.mask_heads + h) * a.lq + i) * a.lk + t] != -std::numeric_limits<float>::infinity()) return t;
    }
  }
  return -1;
}

}  // namespace

Status ContextParallelAttention::check(const plan::AttentionRequest& r, int) {
  return covers(r.kv_dtype, r.hq, r.hkv);
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

// Ring attention over batch row b's lq query rows and n live keys (plan::ring_pairs): query
// row i belongs to the block of the last key it sees (its position under a causal mask), so
// the pairs the ring skips, key blocks after that one, hold only keys the mask hides from it.
// A row's partials arrive one pair at a time and merge into its running (o, lse).
void ContextParallelAttention::run_ring(const AttentionArgs& a, int64_t b) {
  const int64_t n = a.len != nullptr ? std::clamp<int64_t>(a.len[b], 0, a.lk) : a.lk;
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(shards_.blocks(n)));
  for (int64_t i = 0; i < a.lq; ++i) {
    const int64_t last = last_visible(a, b, i, n);
    if (last >= 0) rows_of[static_cast<size_t>(last / shards_.block_tokens)].push_back(i);
  }
  const size_t dv = static_cast<size_t>(a.dv);
  o_.assign(static_cast<size_t>(a.lq * a.hq) * dv, 0.0f);  // every row's running output ...
  lse_.assign(static_cast<size_t>(a.lq * a.hq), -std::numeric_limits<float>::infinity());  // ... and lse
  std::vector<float> two(2 * dv), two_lse(2);
  std::vector<int64_t> keys;
  for (int r = 0; r < shards_.ranks; ++r) {
    for (int step = 0; step < shards_.ranks; ++step) {
      for (const plan::BlockPair& pair : plan::ring_pairs(shards_, n, r, step)) {
        const std::vector<int64_t>& rows = rows_of[static_cast<size_t>(pair.query)];
        if (rows.empty()) continue;
        keys.clear();
        for (int64_t t = pair.key * shards_.block_tokens; t < std::min(n, (pair.key + 1) * shards_.block_tokens); ++t) {
          keys.push_back(t);
        }
        stats_.keys[static_cast<size_t>(r)] += static_cast<int64_t>(keys.size());
        ++stats_.pairs;
        for (int64_t i : rows) {
          for (int64_t h = 0; h < a.hq; ++h) {
            const size_t at = static_cast<size_t>(i * a.hq + h);
            float* running = o_.data() + at * dv;
            std::copy(running, running + dv, two.begin());  // (running, this pair's) -> running
            two_lse[0] = lse_[at];
            two_lse[1] = cpu::partial_attention(a, b, h, i, keys, two.data() + dv);
            lse_[at] = cpu::merge_partials(2, a.dv, two.data(), two_lse.data(), running);
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < a.lq; ++i) {
    for (int64_t h = 0; h < a.hq; ++h) {
      const float* o = o_.data() + static_cast<size_t>(i * a.hq + h) * dv;
      std::copy(o, o + a.dv, a.out + ((b * a.hq + h) * a.lq + i) * a.dv);
    }
  }
  ++stats_.rows;
}

Status ContextParallelAttention::run(const AttentionArgs& a, int) {
  if (Status s = covers(a.kv_dtype, a.hq, a.hkv); !s) {
    return internal_error("context parallel: run() on an Attention eqn that check() refuses: ", s.error().message());
  }
  ++stats_.eqns;
  for (int64_t b = 0; b < a.batch; ++b) {
    if (a.lq == 1) run_row(a, b);
    else run_ring(a, b);
  }
  return {};
}

}  // namespace kvf::exec
