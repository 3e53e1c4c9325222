// Prefix hashes: the chained 64-bit key of a full 16-token block, and the identity of the
// weights that computed it. Only the key: what a hit must also compare (the collision
// check) and the block map are in prefix_cache.h and block_pool.h.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "llm/kv/block_pool.h"

namespace kvf::llm::kv {

// What produced a block's K/V besides its tokens: the model file plus any adapter. K/V of
// one identity is never served to another, so a reload must make a new one (the caller
// folds a load counter into the description).
struct WeightsIdentity {
  uint64_t value = 0;
  friend bool operator==(WeightsIdentity, WeightsIdentity) = default;
};

// From a description such as "path|size|mtime|adapter|load=3"; equal strings, equal ids.
WeightsIdentity weights_identity(std::string_view description);

// The parent hash of a sequence's first block.
inline constexpr BlockHash kRootHash = 0x6b76666f72676521ull;  // "kvforge!"

using BlockTokens = std::array<int32_t, kBlockTokens>;

// Everything that determines a full block's K/V, and the hash of it. The cache keeps the
// inputs with the block so that a hit compares them instead of trusting the 64 bits.
struct BlockKey {
  BlockHash hash = 0;
  BlockHash parent = kRootHash;  // hash of the previous block of the sequence
  BlockTokens tokens{};
  WeightsIdentity identity;
};

// hash_i = H(hash_{i-1}, tokens of block i, identity).
BlockHash hash_block(BlockHash parent, std::span<const int32_t, kBlockTokens> tokens, WeightsIdentity identity);
// The key of one block, its hash filled in.
BlockKey make_block_key(BlockHash parent, std::span<const int32_t, kBlockTokens> tokens, WeightsIdentity identity);
// Chain hashes of every full block of `tokens` (a trailing partial block has none).
std::vector<BlockHash> hash_full_blocks(std::span<const int32_t> tokens, WeightsIdentity identity);

}  // namespace kvf::llm::kv
