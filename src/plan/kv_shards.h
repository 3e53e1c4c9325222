// Where the positions of one sequence live when its KV cache is spread over ranks by
// position (context parallelism), and the ring-attention prefill schedule over that
// placement. Pure functions of (ranks, block size, length): no tensors, no threads. What
// computes over this placement: exec/context_parallel.h on one host, GPU ranks'
// decodes through exec/cuda/step/kv_shard.cu (whose count is KvShards::count on the device);
// a paged pool's blocks over GPU ranks: PoolShards.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace kvf::plan {

// Blocks of `block_tokens` positions dealt round-robin: block k (positions [k·B, (k+1)·B))
// lives on rank k mod ranks. Blocks, not single positions, so a rank's keys are runs as long
// as a paged cache's block (llm::kv::kBlockTokens; plan/ takes it as a parameter); round-
// robin, not contiguous, so a growing sequence needs no reshuffle, the ranks' shares differ
// by at most one block, and the prefill's ring schedule below is balanced.
struct KvShards {
  int ranks = 1;
  int64_t block_tokens = 16;

  // Refuses ranks < 1 or block_tokens < 1 (kInvalidInput).
  static Result<KvShards> create(int ranks, int64_t block_tokens);

  int owner(int64_t pos) const { return static_cast<int>((pos / block_tokens) % ranks); }
  // Blocks that hold n positions (the last may be partial).
  int64_t blocks(int64_t n) const { return (n + block_tokens - 1) / block_tokens; }
  // How many of the positions [0, n) rank `rank` holds.
  int64_t count(int rank, int64_t n) const;
  // Rank `rank`'s positions of [0, n), ascending.
  std::vector<int64_t> positions(int rank, int64_t n) const;
  // Rank `rank`'s blocks of the n_blocks blocks, ascending.
  std::vector<int64_t> blocks_of(int rank, int64_t n_blocks) const;
};

// A paged pool held once by a group of ranks instead of whole by each: pool block b lives on
// rank b mod ranks, as that rank's block b / ranks. Ownership follows the block a slot is
// in, not the position it holds, so whatever order blocks are handed out in, the pool is
// shared out exactly (no rank holds more than blocks_held), a prefix hit needs nothing, and
// a rank finds its keys in a read row by its slots alone. What reads and writes a rank's
// share: exec/cuda/step/kv_shard.cu, whose rules these are on the device.
struct PoolShards {
  int ranks = 1;
  int64_t block_tokens = 16;

  int owner(int64_t slot) const { return static_cast<int>((slot / block_tokens) % ranks); }
  // The slot's row in its owner's share.
  int64_t local(int64_t slot) const { return (slot / block_tokens / ranks) * block_tokens + slot % block_tokens; }
  // Rows each rank holds of a pool of `pool_slots` rows: the most blocks any rank owns.
  int64_t rows_held(int64_t pool_slots) const {
    const int64_t blocks = (pool_slots + block_tokens - 1) / block_tokens;
    return (blocks + ranks - 1) / ranks * block_tokens;
  }
  // A write-map word on rank `rank`: its row there, or -1 (writes nothing) for a slot another
  // rank owns; -1 stays -1.
  int32_t write_word(int rank, int32_t slot) const {
    return slot < 0 || owner(slot) != rank ? -1 : static_cast<int32_t>(local(slot));
  }
  // The columns of a read row's first `len` words that rank `rank` owns, in order: the rank's
  // keys of that row.
  std::vector<int64_t> columns(int rank, const int32_t* row, int64_t len) const;
};

// Whether `v` is one of a paged step's key or value pools of `pool_slots` rows: a cache
// state whose first dimension is the pool's slots.
inline bool is_pool(const ir::Value& v, int64_t pool_slots) {
  const bool cache = v.role == ir::StateRole::kKeyCache || v.role == ir::StateRole::kValueCache;
  return pool_slots > 0 && v.kind == ir::ValueKind::kState && cache && !v.type.shape.empty() &&
         v.type.shape[0] == pool_slots;
}

// Whether a paged step (a compiled graph) can run on ranks that each hold only their
// PoolShards of its pools: every eqn that reads a pool (a key or value cache state whose
// first dimension is the read map's pool, or the pool a write into one gives) is an
// attention or a write through the write map, and nothing else reads the write map. Such a
// rank runs each attention over its own keys and turns the write map into its rows.
// kUnsupported naming the first eqn that reads otherwise; a graph with no read map passes.
Status check_pool_readers(const ir::Graph& g);

// One unit of prefill work: the query rows of block `query` against the keys of block `key`.
// On the diagonal (query == key) the causal mask inside the block still applies; below it
// every key is visible; above it nothing is, and such a pair is never scheduled.
struct BlockPair {
  int64_t query = 0, key = 0;
  bool diagonal() const { return query == key; }
  bool operator==(const BlockPair&) const = default;
};

// Ring attention: each rank holds the query, key and value blocks KvShards gives it. At ring
// step s (0 <= s < ranks) rank r holds the key/value blocks of rank (r - s) mod ranks (its
// own at step 0; each step passes them on to rank r + 1).
int ring_source(const KvShards& shards, int rank, int step);

// The pairs rank `rank` computes at ring step `step` of a causal prefill of n positions from
// position 0: its query blocks against the key blocks it holds then, the pairs the causal
// mask hides entirely skipped. Ordered by query block, then key block. Over every rank and
// step each visible pair (key <= query) appears exactly once.
std::vector<BlockPair> ring_pairs(const KvShards& shards, int64_t n, int rank, int step);

}  // namespace kvf::plan
