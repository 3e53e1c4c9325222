// PrefixCache: match with the last-token rule and the collision check; insert and commit.
#include "llm/kv/prefix_cache.h"

namespace kvf::llm::kv {

PrefixCache::PrefixCache(BlockPool& pool) : pool_(pool), entries_(static_cast<size_t>(pool.num_blocks())) {}

PrefixHit PrefixCache::match(std::span<const int32_t> prompt, WeightsIdentity identity) {
  PrefixHit hit;
  // Blocks that end before the last token: (len - 1) / 16 of them at most.
  const size_t max_blocks = prompt.empty() ? 0 : (prompt.size() - 1) / kBlockTokens;
  int32_t parent_block = kNoBlock;
  for (size_t b = 0; b < max_blocks; ++b) {
    const BlockKey want =
        make_block_key(hit.last_hash, prompt.subspan(b * kBlockTokens).first<kBlockTokens>(), identity);
    const int32_t block = pool_.lookup(want.hash);
    if (block == kNoBlock || !serves(block, want, parent_block)) break;
    pool_.ref(block).ignore();  // lookup() only returns blocks of this pool
    hit.blocks.push_back(block);
    hit.last_hash = want.hash;
    parent_block = block;
  }
  hit_tokens_ += hit.num_tokens();
  miss_tokens_ += static_cast<int64_t>(prompt.size()) - hit.num_tokens();
  return hit;
}

BlockTable PrefixCache::open(std::span<const int32_t> prompt, WeightsIdentity identity) {
  PrefixHit hit = match(prompt, identity);
  BlockTable table(pool_, identity);
  const size_t n = static_cast<size_t>(hit.num_tokens());
  // Cannot fail: the table is fresh and n is 16 per block.
  table.adopt_prefix(std::move(hit.blocks), prompt.first(n), hit.last_hash).ignore();
  return table;
}

Result<bool> PrefixCache::insert(int32_t block, const BlockKey& key, int32_t parent_block) {
  if (block < 0 || block >= pool_.num_blocks() || pool_.ref_count(block) == 0) {
    return internal_error("prefix cache: insert of block ", block, ", which no table holds");
  }
  Entry& entry = entries_[static_cast<size_t>(block)];
  if (pool_.has_hash(block)) {
    if (entry.key.hash == key.hash) return true;
    return internal_error("prefix cache: block ", block, " is already cached under another hash");
  }
  // Only a block reachable from the root can ever be served; caching others would only
  // hold a hash that a reachable block may need.
  const bool parent_ok = parent_block == kNoBlock ? key.parent == kRootHash
                                                  : pool_.lookup(key.parent) == parent_block;
  if (!parent_ok) return false;
  const int32_t existing = pool_.lookup(key.hash);
  if (existing != kNoBlock) {
    if (reachable(existing)) return false;
    pool_.drop_hash(existing);  // a stale entry whose parent is gone: it can never hit again
  }
  if (Status s = pool_.set_hash(block, key.hash); !s) return s.take_error();
  entry = {.key = key,
           .parent_block = parent_block,
           .parent_generation = parent_block == kNoBlock ? 0 : pool_.generation(parent_block)};
  return true;
}

Result<int32_t> PrefixCache::commit(BlockTable& table) {
  int32_t added = 0;
  for (int32_t b = table.committed_blocks(); b < table.num_full_blocks(); ++b) {
    // A block dropped before it was offered ends the chain: no later block is reachable.
    if (table.blocks()[static_cast<size_t>(b)] == kNoBlock) break;
    const auto tokens = table.tokens().subspan(static_cast<size_t>(b) * kBlockTokens).first<kBlockTokens>();
    const BlockKey key = make_block_key(table.committed_hash(), tokens, table.identity());
    const int32_t parent_block = b == 0 ? kNoBlock : table.blocks()[static_cast<size_t>(b - 1)];
    Result<bool> cached = insert(table.blocks()[static_cast<size_t>(b)], key, parent_block);
    if (!cached) return cached.take_error();
    added += *cached ? 1 : 0;
    table.mark_committed(b + 1, key.hash);
  }
  return added;
}

bool PrefixCache::serves(int32_t block, const BlockKey& want, int32_t parent_block) const {
  const Entry& e = entries_[static_cast<size_t>(block)];
  if (e.key.parent != want.parent || e.key.tokens != want.tokens || e.key.identity != want.identity) return false;
  if (e.parent_block != parent_block) return false;
  return parent_block == kNoBlock || e.parent_generation == pool_.generation(parent_block);
}

bool PrefixCache::reachable(int32_t block) const {
  const Entry& e = entries_[static_cast<size_t>(block)];
  if (e.parent_block == kNoBlock) return true;
  return pool_.lookup(e.key.parent) == e.parent_block && pool_.generation(e.parent_block) == e.parent_generation;
}

}  // namespace kvf::llm::kv
