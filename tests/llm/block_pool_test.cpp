// BlockPool: all-or-nothing allocation with a typed refusal, refcounts, the LRU order of
// the free queue, reviving a freed cached block, and evictions when cached blocks are reused.
#include <gtest/gtest.h>

#include <algorithm>

#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "llm/kv/prefix_cache.h"
#include "testing.h"

namespace kvf {
namespace {

using llm::kv::BlockPool;
using llm::kv::BlockTable;
using llm::kv::PrefixCache;
using llm::kv::WeightsIdentity;
using testing::consecutive_ids;
using testing::must;

TEST(BlockPool, StartsWithEveryBlockFreeInIdOrder) {
  BlockPool pool(5);
  EXPECT_EQ(pool.num_blocks(), 5);
  EXPECT_EQ(pool.pool_slots(), 80);
  EXPECT_EQ(pool.free_count(), 5);
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(BlockPool, AllocationIsAllOrNothingWithACapacityRefusal) {
  BlockPool pool(4);
  const std::vector<int32_t> a = must(pool.allocate(3));
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.free_count(), 1);

  Result<std::vector<int32_t>> refused = pool.allocate(2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(refused.error().message().find("need 2 blocks, 1 free"), std::string::npos) << refused.error().message();
  EXPECT_EQ(pool.free_count(), 1);  // nothing was taken
  EXPECT_EQ(pool.ref_count(3), 0);

  EXPECT_EQ(must(pool.allocate(1)), std::vector<int32_t>{3});
  EXPECT_EQ(pool.free_count(), 0);
  Result<std::vector<int32_t>> empty = pool.allocate(1);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), ErrorCode::kCapacity);
  EXPECT_TRUE(must(pool.allocate(0)).empty());
  Result<std::vector<int32_t>> negative = pool.allocate(-1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.error().code(), ErrorCode::kInvalidInput);
}

TEST(BlockPool, RefcountsDecideWhenABlockIsFree) {
  BlockPool pool(2);
  const int32_t b = must(pool.allocate(1))[0];
  EXPECT_EQ(pool.ref_count(b), 1);
  ASSERT_TRUE(pool.ref(b).ok());
  EXPECT_EQ(pool.ref_count(b), 2);
  ASSERT_TRUE(pool.unref(b).ok());
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.free_count(), 1);  // still held by one
  ASSERT_TRUE(pool.unref(b).ok());
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_EQ(pool.free_count(), 2);

  Status twice = pool.unref(b);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code(), ErrorCode::kInternal);
  EXPECT_EQ(pool.free_count(), 2);
  Status outside = pool.ref(7);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().code(), ErrorCode::kInternal);
}

TEST(BlockPool, TheLeastRecentlyFreedBlockIsReusedFirst) {
  BlockPool pool(4);
  const std::vector<int32_t> all = must(pool.allocate(4));
  for (int32_t b : {2, 0, 3, 1}) ASSERT_TRUE(pool.unref(all[static_cast<size_t>(b)]).ok());
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{2, 0, 3, 1}));
  EXPECT_EQ(must(pool.allocate(1)), std::vector<int32_t>{2});
  EXPECT_EQ(must(pool.allocate(2)), (std::vector<int32_t>{0, 3}));
  // Freed again, 2 goes behind 1: it is now the most recently used.
  ASSERT_TRUE(pool.unref(2).ok());
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{1, 2}));
  // Reviving a block from the middle of the queue keeps the others' order.
  ASSERT_TRUE(pool.unref(0).ok());
  ASSERT_TRUE(pool.ref(2).ok());
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(pool.free_count(), 2);
}

TEST(BlockPool, ATableReleasesItsLastBlockFirst) {
  // The tail of a chain is evicted before its head, which other prompts are likelier to share.
  BlockPool pool(4);
  BlockTable table(pool, WeightsIdentity{1});
  ASSERT_TRUE(table.append(consecutive_ids(1, 40)).ok());
  ASSERT_EQ(table.blocks(), (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(table.release().ok());
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{3, 2, 1, 0}));
}

TEST(BlockPool, AFreedCachedBlockIsRevivedWithoutReallocation) {
  BlockPool pool(4);
  PrefixCache cache(pool);
  const WeightsIdentity id{42};
  const std::vector<int32_t> prompt = consecutive_ids(1, 20);
  int32_t cached_block = -1;
  uint64_t generation = 0;
  {
    BlockTable table = cache.open(prompt, id);
    ASSERT_TRUE(table.append(prompt).ok());
    EXPECT_EQ(must(cache.commit(table)), 1);  // the partial second block is not cached
    cached_block = table.blocks()[0];
    generation = pool.generation(cached_block);
    ASSERT_TRUE(table.release().ok());
  }
  EXPECT_EQ(pool.free_count(), 4);
  EXPECT_TRUE(pool.has_hash(cached_block));  // free but still findable

  BlockTable again = cache.open(prompt, id);
  ASSERT_EQ(again.blocks(), std::vector<int32_t>{cached_block});
  EXPECT_EQ(again.num_tokens(), 16);
  EXPECT_EQ(pool.ref_count(cached_block), 1);
  EXPECT_EQ(pool.free_count(), 3);  // taken out of the free queue
  EXPECT_EQ(pool.generation(cached_block), generation);  // the same K/V, not a new allocation
  EXPECT_EQ(pool.evictions(), 0);
  const std::vector<int32_t> queue = pool.free_queue();
  EXPECT_EQ(std::count(queue.begin(), queue.end(), cached_block), 0);
}

TEST(BlockPool, ReusingACachedBlockEvictsItsHash) {
  BlockPool pool(2);
  PrefixCache cache(pool);
  const WeightsIdentity id{7};
  const std::vector<int32_t> prompt = consecutive_ids(1, 17);
  {
    BlockTable table = cache.open(prompt, id);
    ASSERT_TRUE(table.append(prompt).ok());
    ASSERT_EQ(must(cache.commit(table)), 1);
  }  // destroyed: released
  EXPECT_EQ(pool.cached_count(), 1);
  EXPECT_EQ(pool.evictions(), 0);

  // Block 1 (uncached, freed first) is reused before block 0; then block 0 goes too.
  std::vector<int32_t> got = must(pool.allocate(1));
  EXPECT_EQ(got, std::vector<int32_t>{1});
  EXPECT_EQ(pool.evictions(), 0);
  got = must(pool.allocate(1));
  EXPECT_EQ(got, std::vector<int32_t>{0});
  EXPECT_EQ(pool.evictions(), 1);
  EXPECT_EQ(pool.cached_count(), 0);
  EXPECT_FALSE(pool.has_hash(0));
  for (int32_t b : {0, 1}) ASSERT_TRUE(pool.unref(b).ok());

  const size_t hits = cache.match(prompt, id).blocks.size();
  EXPECT_EQ(hits, 0u);
  EXPECT_EQ(pool.free_count(), 2);
}

}  // namespace
}  // namespace kvf
