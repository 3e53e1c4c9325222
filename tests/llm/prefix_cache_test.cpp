// PrefixCache: hits on a shared prefix, the last prompt token always computed, no hits
// across weights identities, the collision check against forged equal hashes, the parent
// check after a reallocation, and the hit/miss counters.
#include <gtest/gtest.h>

#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "llm/kv/prefix_cache.h"
#include "llm/kv/prefix_hash.h"
#include "testing.h"

namespace kvf {
namespace {

using llm::kv::BlockKey;
using llm::kv::BlockPool;
using llm::kv::BlockTable;
using llm::kv::kBlockTokens;
using llm::kv::kNoBlock;
using llm::kv::kRootHash;
using llm::kv::PrefixCache;
using llm::kv::PrefixHit;
using llm::kv::WeightsIdentity;
using llm::kv::weights_identity;
using testing::consecutive_ids;
using testing::must;

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs a whole prompt through a new table and caches its full blocks, as a finished
// prefill would; returns the table (still holding its blocks).
BlockTable prefill(PrefixCache& cache, const std::vector<int32_t>& prompt, WeightsIdentity id) {
  BlockTable t = cache.open(prompt, id);
  Status s = t.append(std::span(prompt).subspan(static_cast<size_t>(t.num_tokens())));
  EXPECT_TRUE(s.ok());
  must(cache.commit(t));
  return t;
}

const WeightsIdentity kBase = weights_identity("/m/llama.gguf|1000|17|");

TEST(PrefixCache, HitsOnASharedPrefix) {
  BlockPool pool(16);
  PrefixCache cache(pool);
  const std::vector<int32_t> system = consecutive_ids(100, 32);
  BlockTable a = prefill(cache, concat(system, consecutive_ids(500, 9)), kBase);
  ASSERT_EQ(a.blocks().size(), 3u);
  EXPECT_EQ(pool.cached_count(), 2);

  BlockTable b = cache.open(concat(system, consecutive_ids(900, 5)), kBase);
  EXPECT_EQ(b.blocks(), (std::vector<int32_t>{a.blocks()[0], a.blocks()[1]}));
  EXPECT_EQ(b.num_tokens(), 32);
  EXPECT_EQ(pool.ref_count(a.blocks()[0]), 2);
  EXPECT_EQ(pool.ref_count(a.blocks()[2]), 1);

  // Diverging inside the second block: only the first block is shared.
  std::vector<int32_t> c_prompt = concat(system, consecutive_ids(900, 5));
  c_prompt[20] = 7;
  const PrefixHit c = cache.match(c_prompt, kBase);
  EXPECT_EQ(c.blocks, std::vector<int32_t>{a.blocks()[0]});
  EXPECT_EQ(pool.ref_count(a.blocks()[0]), 3);
  for (int32_t blk : c.blocks) ASSERT_TRUE(pool.unref(blk).ok());

  // Diverging in the first token: nothing.
  std::vector<int32_t> d_prompt = c_prompt;
  d_prompt[0] = 1;
  EXPECT_TRUE(cache.match(d_prompt, kBase).blocks.empty());
}

TEST(PrefixCache, TheLastPromptTokenIsNeverServedFromCache) {
  BlockPool pool(16);
  PrefixCache cache(pool);
  const std::vector<int32_t> p48 = consecutive_ids(1, 48);
  BlockTable a = prefill(cache, p48, kBase);
  ASSERT_EQ(pool.cached_count(), 3);  // all three blocks are full and cached

  auto hit_tokens = [&](int32_t len) {
    const std::vector<int32_t> prompt(p48.begin(), p48.begin() + len);
    PrefixHit h = cache.match(prompt, kBase);
    for (int32_t blk : h.blocks) EXPECT_TRUE(pool.unref(blk).ok());
    return h.num_tokens();
  };
  EXPECT_EQ(hit_tokens(48), 32);  // the third block holds token 47: computed again
  EXPECT_EQ(hit_tokens(33), 32);
  EXPECT_EQ(hit_tokens(32), 16);  // exactly two blocks: at most the first
  EXPECT_EQ(hit_tokens(17), 16);
  EXPECT_EQ(hit_tokens(16), 0);
  EXPECT_EQ(hit_tokens(1), 0);
  EXPECT_EQ(hit_tokens(0), 0);
}

TEST(PrefixCache, AnotherIdentityNeverHits) {
  BlockPool pool(16);
  PrefixCache cache(pool);
  const std::vector<int32_t> prompt = consecutive_ids(3, 40);
  BlockTable a = prefill(cache, prompt, kBase);
  ASSERT_EQ(pool.cached_count(), 2);

  const WeightsIdentity adapter = weights_identity("/m/llama.gguf|1000|17|lora-a.safetensors");
  const WeightsIdentity reloaded = weights_identity("/m/llama.gguf|1000|17||load=2");
  const WeightsIdentity touched = weights_identity("/m/llama.gguf|1000|18|");  // new mtime
  for (WeightsIdentity other : {adapter, reloaded, touched}) {
    ASSERT_NE(other, kBase);
    EXPECT_TRUE(cache.match(prompt, other).blocks.empty());
  }
  EXPECT_EQ(weights_identity("/m/llama.gguf|1000|17|"), kBase);  // same description, same id

  // The adapter's own entries live beside the base's, and serve only the adapter.
  BlockTable b = prefill(cache, prompt, adapter);
  EXPECT_EQ(pool.cached_count(), 4);
  PrefixHit hb = cache.match(prompt, adapter);
  EXPECT_EQ(hb.blocks, (std::vector<int32_t>{b.blocks()[0], b.blocks()[1]}));
  PrefixHit ha = cache.match(prompt, kBase);
  EXPECT_EQ(ha.blocks, (std::vector<int32_t>{a.blocks()[0], a.blocks()[1]}));
  for (const PrefixHit* h : {&hb, &ha}) {
    for (int32_t blk : h->blocks) ASSERT_TRUE(pool.unref(blk).ok());
  }
}

// Forges an entry whose hash equals the real hash of the prompt's block but whose stored
// inputs differ, as a 64-bit collision would; the hit must be refused.
class ForgedCollision : public ::testing::Test {
 protected:
  void SetUp() override { block_ = must(pool_.allocate(1))[0]; }

  BlockPool pool_{8};
  PrefixCache cache_{pool_};
  int32_t block_ = kNoBlock;
  const std::vector<int32_t> prompt_ = consecutive_ids(10, 20);
  const BlockKey real_ = llm::kv::make_block_key(kRootHash, std::span(prompt_).first<kBlockTokens>(), kBase);
};

TEST_F(ForgedCollision, DifferentTokensNeverHit) {
  BlockKey forged = real_;
  forged.tokens[5] += 1;  // same hash, other tokens
  ASSERT_TRUE(must(cache_.insert(block_, forged, kNoBlock)));
  ASSERT_EQ(pool_.lookup(real_.hash), block_);  // the hash does find it...
  EXPECT_TRUE(cache_.match(prompt_, kBase).blocks.empty());  // ...but the tokens differ
  EXPECT_EQ(pool_.ref_count(block_), 1);
}

TEST_F(ForgedCollision, AnotherIdentityOrParentNeverHits) {
  BlockKey forged = real_;
  forged.identity = WeightsIdentity{real_.identity.value + 1};
  ASSERT_TRUE(must(cache_.insert(block_, forged, kNoBlock)));
  EXPECT_TRUE(cache_.match(prompt_, kBase).blocks.empty());

  // A second-level block stored after another parent hash, under the hash our chain expects.
  const int32_t child = must(pool_.allocate(1))[0];
  const std::vector<int32_t> prompt2 = consecutive_ids(10, 40);
  BlockTable first = cache_.open(prompt2, kBase);
  ASSERT_TRUE(first.blocks().empty());
  BlockTable owner(pool_, kBase);
  ASSERT_TRUE(owner.append(std::span(prompt2).first(16)).ok());
  // Dropping the forged root entry first makes the honest one reachable.
  pool_.drop_hash(block_);
  ASSERT_EQ(must(cache_.commit(owner)), 1);
  const int32_t root = owner.blocks()[0];
  BlockKey second = llm::kv::make_block_key(real_.hash, std::span(prompt2).subspan(16).first<kBlockTokens>(), kBase);
  BlockKey wrong_parent = second;
  wrong_parent.parent = real_.hash ^ 1;
  // Refused at insert: its declared parent hash does not name the block it follows.
  EXPECT_FALSE(must(cache_.insert(child, wrong_parent, root)));
  EXPECT_FALSE(pool_.has_hash(child));
  ASSERT_TRUE(must(cache_.insert(child, second, root)));
  PrefixHit h = cache_.match(prompt2, kBase);
  EXPECT_EQ(h.blocks, (std::vector<int32_t>{root, child}));
  for (int32_t blk : h.blocks) ASSERT_TRUE(pool_.unref(blk).ok());
}

TEST(PrefixCache, ABlockWhoseParentWasReallocatedIsNotServed) {
  BlockPool pool(3);
  PrefixCache cache(pool);
  const std::vector<int32_t> prompt = consecutive_ids(1, 33);
  BlockTable a = prefill(cache, prompt, kBase);
  const int32_t parent = a.blocks()[0];
  const int32_t child = a.blocks()[1];
  ASSERT_TRUE(pool.ref(child).ok());  // someone keeps the child alive
  ASSERT_TRUE(a.release().ok());
  // Reallocate everything free: the parent gets a new generation, then is cached again
  // with the very same key (a fresh prefill of the same 16 tokens).
  std::vector<int32_t> got = must(pool.allocate(2));
  ASSERT_NE(std::find(got.begin(), got.end(), parent), got.end());
  EXPECT_EQ(pool.evictions(), 1);
  const BlockKey root_key = llm::kv::make_block_key(kRootHash, std::span(prompt).first<kBlockTokens>(), kBase);
  ASSERT_TRUE(must(cache.insert(parent, root_key, kNoBlock)));
  ASSERT_TRUE(pool.has_hash(child));  // still in the map...
  PrefixHit h = cache.match(prompt, kBase);
  EXPECT_EQ(h.blocks, std::vector<int32_t>{parent});  // ...but written after an older parent
  EXPECT_EQ(pool.ref_count(parent), 2);

  // A new child after the live parent replaces the stale entry.
  const int32_t other = got[0] == parent ? got[1] : got[0];
  const BlockKey child_key =
      llm::kv::make_block_key(root_key.hash, std::span(prompt).subspan(16).first<kBlockTokens>(), kBase);
  ASSERT_TRUE(must(cache.insert(other, child_key, parent)));
  EXPECT_FALSE(pool.has_hash(child));
  PrefixHit h2 = cache.match(prompt, kBase);
  EXPECT_EQ(h2.blocks, (std::vector<int32_t>{parent, other}));
}

TEST(PrefixCache, ABlockWrittenAfterAnotherParentBlockIsNotServed) {
  BlockPool pool(4);
  PrefixCache cache(pool);
  const std::vector<int32_t> prompt = consecutive_ids(1, 33);
  BlockTable a = prefill(cache, prompt, kBase);
  ASSERT_EQ(a.blocks(), (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(pool.ref(1).ok());  // the child stays alive and cached
  ASSERT_TRUE(a.release().ok());
  ASSERT_EQ(pool.free_queue(), (std::vector<int32_t>{3, 2, 0}));
  // Block 3 (first allocation: generation 1, as block 0 had when the child was written)
  // takes the parent's key after block 0 is evicted.
  const std::vector<int32_t> got = must(pool.allocate(3));
  ASSERT_EQ(got, (std::vector<int32_t>{3, 2, 0}));
  ASSERT_EQ(pool.generation(3), 1u);
  const BlockKey root_key = llm::kv::make_block_key(kRootHash, std::span(prompt).first<kBlockTokens>(), kBase);
  ASSERT_TRUE(must(cache.insert(3, root_key, kNoBlock)));
  ASSERT_TRUE(pool.has_hash(1));
  PrefixHit h = cache.match(prompt, kBase);
  EXPECT_EQ(h.blocks, std::vector<int32_t>{3});  // the child followed block 0, not block 3
}

TEST(PrefixCache, DuplicatesAreNotCachedTwice) {
  BlockPool pool(8);
  PrefixCache cache(pool);
  const std::vector<int32_t> prompt = consecutive_ids(5, 40);
  // Two sequences miss together (neither has committed yet), both compute the prompt.
  BlockTable a = cache.open(prompt, kBase);
  BlockTable b = cache.open(prompt, kBase);
  ASSERT_TRUE(a.append(prompt).ok());
  ASSERT_TRUE(b.append(prompt).ok());
  EXPECT_EQ(must(cache.commit(a)), 2);
  EXPECT_EQ(must(cache.commit(b)), 0);  // the first writer keeps the entries
  EXPECT_EQ(pool.cached_count(), 2);
  EXPECT_EQ(b.committed_blocks(), 2);
  PrefixHit h = cache.match(prompt, kBase);
  EXPECT_EQ(h.blocks, (std::vector<int32_t>{a.blocks()[0], a.blocks()[1]}));
  for (int32_t blk : h.blocks) ASSERT_TRUE(pool.unref(blk).ok());
}

TEST(PrefixCache, CountsHitAndMissTokens) {
  BlockPool pool(16);
  PrefixCache cache(pool);
  const std::vector<int32_t> prompt = consecutive_ids(1, 40);
  BlockTable a = prefill(cache, prompt, kBase);  // all 40 missed
  EXPECT_EQ(cache.hit_tokens(), 0);
  EXPECT_EQ(cache.miss_tokens(), 40);
  BlockTable b = cache.open(prompt, kBase);  // 32 hit, 8 to compute
  EXPECT_EQ(cache.hit_tokens(), 32);
  EXPECT_EQ(cache.miss_tokens(), 48);
  BlockTable c = cache.open(consecutive_ids(1, 20), kBase);  // 16 hit, 4 to compute
  EXPECT_EQ(cache.hit_tokens(), 48);
  EXPECT_EQ(cache.miss_tokens(), 52);
  BlockTable d = cache.open(consecutive_ids(1, 20), weights_identity("other"));
  EXPECT_EQ(cache.hit_tokens(), 48);
  EXPECT_EQ(cache.miss_tokens(), 72);
  EXPECT_EQ(cache.evictions(), 0);
}

TEST(PrefixHash, ChainsOverBlocksAndIdentity) {
  const std::vector<int32_t> t = consecutive_ids(0, 40);
  const std::vector<uint64_t> h = llm::kv::hash_full_blocks(t, kBase);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], llm::kv::hash_block(kRootHash, std::span(t).first<kBlockTokens>(), kBase));
  EXPECT_EQ(h[1], llm::kv::hash_block(h[0], std::span(t).subspan(16).first<kBlockTokens>(), kBase));
  EXPECT_NE(h[0], h[1]);
  // The same second block after another first block hashes differently.
  std::vector<int32_t> u = t;
  u[3] = -1;
  EXPECT_NE(llm::kv::hash_full_blocks(u, kBase)[1], h[1]);
  EXPECT_NE(llm::kv::hash_full_blocks(t, weights_identity("x"))[0], h[0]);
  EXPECT_NE(weights_identity("a").value, weights_identity(std::string("a\0", 2)).value);
}

}  // namespace
}  // namespace kvf
