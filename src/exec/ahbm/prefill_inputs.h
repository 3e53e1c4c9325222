// The inputs of one prefill launch as they sit on the chip (ADR §0.5.3, §5.4, §5.5): for
// every KV head, each ring rank's PE holds its queries (post-RoPE Q of the G query heads) and
// its keys (post-RoPE K, raw V), in the storage type. No SP (N = 1): the PE holds the whole
// KV cache of q_start + q_len tokens and the chunk's q_len queries. Ring (N > 1, q_start 0):
// rank p holds the queries and the K/V of its shard (geometry.h). Rows past a PE's valid
// length are NaN, so a kernel that reads past it cannot pass a numerics check.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/ahbm/decode_inputs.h"
#include "exec/ahbm/geometry.h"

namespace kvf::ahbm {

struct GlobalInputs;

struct PeShard {
  int64_t q_len = 0, kv_len = 0;
  std::vector<float> q;     // [group, q_cap, head_dim]
  std::vector<float> k, v;  // [kv_cap, head_dim]
};

struct PrefillInputs {
  AttnDims dims;
  DType storage = DType::kBF16;
  int64_t q_start = 0, q_len = 0;  // queries at q_start .. q_start + q_len - 1 over keys 0 .. q_start + q_len - 1
  ShardGeometry shards;            // the ring; n == 1: no SP
  int64_t q_cap = 0, kv_cap = 0;   // rows per PE buffer: the longest shard plus a NaN row
  int64_t value_heads = 0;         // KV heads 0 .. value_heads - 1 hold values; the rest are timing only
  std::vector<std::vector<PeShard>> pe;  // [n_kv_heads][rank]
  int64_t context() const { return q_start + q_len; }
  int n() const { return shards.n; }
};

// The global position of rank's slot-th query and of its slot-th key (the RoPE position).
int64_t query_global(const PrefillInputs& in, int rank, int64_t slot);
int64_t key_global(const PrefillInputs& in, int rank, int64_t slot);

// Rounds g to storage and places it: N = 1 keeps g's q_start; N > 1 needs q_start = 0 and
// cuts the prompt by `layout` (start_pe = request_id mod N for kStrided). `dims` may have
// more KV heads than g: those carry no values (a timing-only run of the other heads).
PrefillInputs place_prefill(const GlobalInputs& g, const AttnDims& dims, DType storage, int n, ShardLayout layout,
                            int64_t request_id);

}  // namespace kvf::ahbm
