// Prefix hashes: a splitmix64-style finalizer chained over the block's words.
#include "llm/kv/prefix_hash.h"

#include <algorithm>

namespace kvf::llm::kv {
namespace {

// A bijective 64-bit mixer (the splitmix64 finalizer): every input bit flips about half of
// the output bits, so chaining it over the words keeps the whole block in play.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // keeps an all-zero input off mix64's fixed point 0

// One step of the chain: absorb a word into the state.
uint64_t absorb(uint64_t state, uint64_t word) { return mix64((state ^ word) + kGolden); }

}  // namespace

WeightsIdentity weights_identity(std::string_view description) {
  uint64_t h = mix64(description.size() + kGolden);
  // Eight bytes per step, little end first; the length above separates "a" from "a\0".
  for (size_t i = 0; i < description.size(); i += 8) {
    uint64_t word = 0;
    for (size_t j = 0; j < 8 && i + j < description.size(); ++j) {
      word |= uint64_t{static_cast<unsigned char>(description[i + j])} << (8 * j);
    }
    h = absorb(h, word);
  }
  return {mix64(h)};
}

BlockHash hash_block(BlockHash parent, std::span<const int32_t, kBlockTokens> tokens, WeightsIdentity identity) {
  uint64_t h = absorb(mix64(parent + kGolden), identity.value);
  // Two token ids per word: 8 absorbs for the 16 tokens.
  for (size_t i = 0; i < tokens.size(); i += 2) {
    const uint64_t lo = static_cast<uint32_t>(tokens[i]);
    const uint64_t hi = static_cast<uint32_t>(tokens[i + 1]);
    h = absorb(h, lo | (hi << 32));
  }
  return mix64(h);
}

BlockKey make_block_key(BlockHash parent, std::span<const int32_t, kBlockTokens> tokens, WeightsIdentity identity) {
  BlockKey key{.hash = hash_block(parent, tokens, identity), .parent = parent, .tokens = {}, .identity = identity};
  std::copy(tokens.begin(), tokens.end(), key.tokens.begin());
  return key;
}

std::vector<BlockHash> hash_full_blocks(std::span<const int32_t> tokens, WeightsIdentity identity) {
  std::vector<BlockHash> out;
  BlockHash parent = kRootHash;
  for (size_t b = 0; (b + 1) * kBlockTokens <= tokens.size(); ++b) {
    parent = hash_block(parent, tokens.subspan(b * kBlockTokens).first<kBlockTokens>(), identity);
    out.push_back(parent);
  }
  return out;
}

}  // namespace kvf::llm::kv
