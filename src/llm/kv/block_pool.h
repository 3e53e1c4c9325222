// BlockPool: the fixed set of 16-token KV blocks every sequence draws from, with refcounts,
// an LRU free queue and the hash -> block map of the prefix cache (vLLM v1's BlockPool).
// Pure bookkeeping: no K/V lives here (the pools are graph state, DESIGN.md §4); the hit
// rules and the collision check live in prefix_cache.h, one sequence's map in block_table.h.
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace kvf::llm::kv {

inline constexpr int32_t kBlockTokens = 16;
// Slots (block * 16 + offset) are i32 words of the read and write maps.
inline constexpr int32_t kMaxBlocks = std::numeric_limits<int32_t>::max() / kBlockTokens;
inline constexpr int32_t kNoBlock = -1;

using BlockHash = uint64_t;

// Every block exists from the start; ids never change, so block tables stay append-only.
// No block is reserved as padding: read-map words past a row's length name slot 0 and are
// masked, padding writes use -1 (docs/kv.md). A block is either held (refcount > 0) or on
// the free queue, never both. Each operation is O(1): the free queue is a doubly linked
// list threaded through the blocks themselves.
//
// The hash map lives here rather than in PrefixCache because eviction happens inside
// allocate(): the moment a cached free block is handed out again, its entry must go, and
// only the pool sees that moment (a callback into the cache would buy nothing).
class BlockPool {
 public:
  // num_blocks is clamped to [0, kMaxBlocks]. The free queue starts as 0, 1, ..., n-1.
  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;  // tables and caches point at it
  BlockPool& operator=(const BlockPool&) = delete;

  // n blocks from the head of the free queue (least recently used first), each with
  // refcount 1; a block that was cached loses its hash (an eviction). When fewer than n
  // are free: kCapacity, and nothing is allocated.
  Result<std::vector<int32_t>> allocate(int32_t n);
  // One more holder. A free block (a cached one being revived by a prefix hit) leaves the
  // free queue without being reallocated: its K/V and hash stay.
  Status ref(int32_t block);
  // One holder fewer; at 0 the block goes to the tail of the free queue, keeping its hash
  // (still findable until allocate() hands it out again). Unref of a free block: kInternal.
  Status unref(int32_t block);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int64_t pool_slots() const { return int64_t{num_blocks()} * kBlockTokens; }
  int32_t free_count() const { return free_count_; }
  // block in [0, num_blocks()) for the accessors below.
  int32_t ref_count(int32_t block) const { return blocks_[static_cast<size_t>(block)].ref_count; }
  // Counts the block's allocations: a K/V written in one generation is gone in the next.
  uint64_t generation(int32_t block) const { return blocks_[static_cast<size_t>(block)].generation; }
  // The free queue from head (next to be allocated) to tail; O(free_count), for tests.
  std::vector<int32_t> free_queue() const;

  // The prefix-cache map. set_hash refuses (kInternal) a hash that is taken or a block that
  // already has one; drop_hash forgets a block's hash (no-op when it has none).
  Status set_hash(int32_t block, BlockHash hash);
  void drop_hash(int32_t block);
  int32_t lookup(BlockHash hash) const;  // kNoBlock when absent
  bool has_hash(int32_t block) const { return blocks_[static_cast<size_t>(block)].cached; }
  int32_t cached_count() const { return static_cast<int32_t>(by_hash_.size()); }
  // Cached blocks whose hash was dropped because allocate() reused them.
  int64_t evictions() const { return evictions_; }

 private:
  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNoBlock;  // free-queue links, meaningful while ref_count == 0
    int32_t next = kNoBlock;
    bool cached = false;
    BlockHash hash = 0;
    uint64_t generation = 0;
  };

  Status check_id(int32_t block, const char* op) const;
  void push_back(int32_t block);
  void remove(int32_t block);

  std::vector<Block> blocks_;
  int32_t head_ = kNoBlock;
  int32_t tail_ = kNoBlock;
  int32_t free_count_ = 0;
  std::unordered_map<BlockHash, int32_t> by_hash_;
  int64_t evictions_ = 0;
};

}  // namespace kvf::llm::kv
