// BlockTable: one sequence's map from logical positions to pool slots, the blocks it holds
// and the token ids it wrote, plus the read/write map rows a paged step binds (DESIGN §4).
// Not the scheduler: it never picks what to preempt; a refused append says "no room" and
// leaves everything as it was. Prefix hits and caching come from prefix_cache.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "llm/kv/block_pool.h"
#include "llm/kv/prefix_hash.h"

namespace kvf::llm::kv {

// Position p lives at slot blocks[p / 16] * 16 + p % 16. Blocks are appended at the end and
// may be dropped anywhere behind it (a window moved past them): a dropped block leaves a
// hole (kNoBlock) so positions keep their block index. A block shared with other tables (a
// prefix hit) is always full, so no table writes into a block another table reads.
// Move-only; destroying a table releases its blocks.
// The key position of a read column past a row's live positions: later than any query.
inline constexpr int32_t kNoKey = 1 << 30;

class BlockTable {
 public:
  BlockTable(BlockPool& pool, WeightsIdentity identity) : pool_(&pool), identity_(identity) {}
  ~BlockTable() { release().ignore(); }
  BlockTable(BlockTable&& o) noexcept;
  BlockTable& operator=(BlockTable&& o) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  // Blocks the pool must supply for `new_tokens` more tokens (0 while the last block has room).
  int32_t blocks_needed(int64_t new_tokens) const;
  // Appends token ids at positions num_tokens().., allocating blocks on block boundaries.
  // All or nothing: a kCapacity refusal leaves the table and the pool untouched.
  Status append(std::span<const int32_t> tokens);
  // Makes an empty table start with a prefix hit: `blocks` (one ref each already taken for
  // this table) hold `tokens` (blocks.size() * 16 of them), full and committed up to
  // `last_hash`. Used by PrefixCache::open.
  Status adopt_prefix(std::vector<int32_t> blocks, std::span<const int32_t> tokens, BlockHash last_hash);
  // Unrefs every block, the last one first so the free queue gives up a chain from its tail
  // (the shared head of a prompt stays cached longest), and empties the table.
  Status release();
  // Gives block `index` (positions index*16 ..) back to the pool; later reads skip it and
  // it can no longer be written. A hole stays a hole.
  Status drop_block(int32_t index);

  // The pool slot of position `pos`, or -1 when the table has no block there.
  int32_t slot(int64_t pos) const;
  // Positions below num_tokens() in blocks the table still holds: the read row's width.
  int64_t live_positions() const;
  // Fills one compact read-map row [cap] and its key positions: the slot and the position of
  // every live position in order, then slot 0 (a valid word of the map's declared range;
  // nothing reads it) at position kNoKey, past any query. kCapacity when the live
  // positions do not fit the row.
  Status fill_read_row(std::span<int32_t> row, std::span<int32_t> key_pos) const;
  // Write-map entries of positions first_pos.. (out.size() of them), all below num_tokens():
  // the slots a step's new tokens are written to. Padding entries (-1) are the caller's.
  Status fill_write(int64_t first_pos, std::span<int32_t> out) const;

  const std::vector<int32_t>& blocks() const { return blocks_; }  // kNoBlock where dropped
  int32_t live_blocks() const;
  std::span<const int32_t> tokens() const { return tokens_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int32_t num_full_blocks() const { return static_cast<int32_t>(num_tokens() / kBlockTokens); }
  WeightsIdentity identity() const { return identity_; }

  // Full blocks already offered to the prefix cache, and the chain hash of the last one
  // (kRootHash when none): PrefixCache::commit resumes from here.
  int32_t committed_blocks() const { return committed_blocks_; }
  BlockHash committed_hash() const { return committed_hash_; }
  void mark_committed(int32_t blocks, BlockHash last_hash);

 private:
  BlockPool* pool_;
  WeightsIdentity identity_;
  std::vector<int32_t> blocks_;
  std::vector<int32_t> tokens_;  // [num_tokens]
  int32_t committed_blocks_ = 0;
  BlockHash committed_hash_ = kRootHash;
};

}  // namespace kvf::llm::kv
