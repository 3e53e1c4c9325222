// PrefixCache: serves full 16-token blocks that another sequence already computed, so a
// prompt that shares a prefix skips its prefill. Policy only: the hash -> block map and
// the eviction of reused blocks are in block_pool.h, the hash itself in prefix_hash.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "llm/kv/prefix_hash.h"

namespace kvf::llm::kv {

// A prompt's longest run of cached blocks; the caller holds one ref on each.
struct PrefixHit {
  std::vector<int32_t> blocks;
  BlockHash last_hash = kRootHash;  // chain hash of the last block (kRootHash when none)
  int64_t num_tokens() const { return static_cast<int64_t>(blocks.size()) * kBlockTokens; }
};

// A hit trusts no 64-bit hash alone. Each cached block keeps its key (parent hash, 16
// tokens, identity) and the exact parent block it was written after (id and generation);
// a hit compares all of them, so by induction from the first block the whole prefix of a
// served block equals the prompt's. A block whose parent was reallocated is never served.
class PrefixCache {
 public:
  explicit PrefixCache(BlockPool& pool);

  // The longest run of cached full blocks starting the prompt, one ref taken on each (a
  // free one leaves the free queue). Never the block holding the last prompt token: its
  // logits must be computed, so a prompt of 32 tokens hits at most its first 16.
  PrefixHit match(std::span<const int32_t> prompt, WeightsIdentity identity);
  // match() as a new table; the caller appends prompt.subspan(table.num_tokens()).
  BlockTable open(std::span<const int32_t> prompt, WeightsIdentity identity);

  // Caches a held, full block whose K/V are written, under key.hash. parent_block is the
  // block before it in its table (kNoBlock for the first), and must itself be the cached
  // block of key.parent: an unreachable block is not cached. Returns whether the block is
  // now findable; false also when the hash already names a reachable block (full blocks
  // are not de-duplicated; the first writer keeps the entry). kInternal on misuse.
  Result<bool> insert(int32_t block, const BlockKey& key, int32_t parent_block);
  // Inserts the table's full blocks not yet committed; returns how many became cached.
  Result<int32_t> commit(BlockTable& table);

  int64_t hit_tokens() const { return hit_tokens_; }    // prompt tokens served from cache
  int64_t miss_tokens() const { return miss_tokens_; }  // prompt tokens left to compute
  int64_t evictions() const { return pool_.evictions(); }

 private:
  struct Entry {
    BlockKey key;
    int32_t parent_block = kNoBlock;
    uint64_t parent_generation = 0;
  };

  bool serves(int32_t block, const BlockKey& want, int32_t parent_block) const;
  bool reachable(int32_t block) const;

  BlockPool& pool_;
  std::vector<Entry> entries_;  // [num_blocks]; meaningful while the pool says has_hash
  int64_t hit_tokens_ = 0;
  int64_t miss_tokens_ = 0;
};

}  // namespace kvf::llm::kv
