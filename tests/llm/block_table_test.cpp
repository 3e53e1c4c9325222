// BlockTable: the slot arithmetic, blocks needed per append, all-or-nothing appends, the
// read-map row (padding with a valid slot) and write-map entries, and release on destruction.
#include <gtest/gtest.h>

#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "testing.h"

namespace kvf {
namespace {

using llm::kv::BlockPool;
using llm::kv::BlockTable;
using llm::kv::WeightsIdentity;
using llm::kv::kNoKey;
using testing::consecutive_ids;
using testing::must;

TEST(BlockTable, SlotsFollowTheBlocks) {
  BlockPool pool(8);
  const std::vector<int32_t> taken = must(pool.allocate(2));  // so the table gets 2, 3, ...
  BlockTable t(pool, WeightsIdentity{1});
  EXPECT_EQ(t.blocks_needed(1), 1);
  EXPECT_EQ(t.blocks_needed(0), 0);
  ASSERT_TRUE(t.append(consecutive_ids(0, 5)).ok());
  EXPECT_EQ(t.blocks(), std::vector<int32_t>{2});
  EXPECT_EQ(t.blocks_needed(11), 0);  // fills block 2 exactly
  EXPECT_EQ(t.blocks_needed(12), 1);
  EXPECT_EQ(t.blocks_needed(44), 3);
  ASSERT_TRUE(pool.unref(taken[0]).ok());  // block 0 goes behind 4..7 in the free queue
  ASSERT_TRUE(t.append(consecutive_ids(0, 30)).ok());
  EXPECT_EQ(t.num_tokens(), 35);
  EXPECT_EQ(t.blocks(), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(t.slot(0), 32);
  EXPECT_EQ(t.slot(15), 47);
  EXPECT_EQ(t.slot(16), 48);
  EXPECT_EQ(t.slot(34), 4 * 16 + 2);
  EXPECT_EQ(t.slot(47), 4 * 16 + 15);  // inside the last block, not yet written
  EXPECT_EQ(t.slot(48), -1);
  EXPECT_EQ(t.slot(-1), -1);
  EXPECT_EQ(t.num_full_blocks(), 2);
}

TEST(BlockTable, ARefusedAppendChangesNothing) {
  BlockPool pool(3);
  BlockTable t(pool, WeightsIdentity{1});
  ASSERT_TRUE(t.append(consecutive_ids(0, 20)).ok());
  ASSERT_EQ(pool.free_count(), 1);
  Status s = t.append(consecutive_ids(0, 60));  // 80 tokens: 3 more blocks, 1 free
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(s.error().message().find("need 3 blocks, 1 free"), std::string::npos) << s.error().message();
  EXPECT_EQ(t.num_tokens(), 20);
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(pool.free_count(), 1);
  ASSERT_TRUE(t.append(consecutive_ids(0, 28)).ok());  // exactly the last block
  EXPECT_EQ(pool.free_count(), 0);
  ASSERT_TRUE(t.append({}).ok());
}

TEST(BlockTable, ReadRowPadsWithAValidSlotAndWriteEntriesNameNewTokens) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.unref(must(pool.allocate(1))[0]).ok());  // queue: 1, 2, 3, 0
  BlockTable t(pool, WeightsIdentity{1});
  ASSERT_TRUE(t.append(consecutive_ids(0, 18)).ok());
  ASSERT_EQ(t.blocks(), (std::vector<int32_t>{1, 2}));
  std::vector<int32_t> row(40, -7), keys(40, -7);
  ASSERT_TRUE(t.fill_read_row(row, keys).ok());
  for (int32_t p = 0; p < 16; ++p) EXPECT_EQ(row[static_cast<size_t>(p)], 16 + p);
  EXPECT_EQ(row[16], 32);
  EXPECT_EQ(row[17], 33);
  for (int32_t p = 0; p < 18; ++p) EXPECT_EQ(keys[static_cast<size_t>(p)], p);
  for (size_t p = 18; p < row.size(); ++p) {
    EXPECT_EQ(row[p], 0) << p;  // in [0, pool_slots)
    EXPECT_EQ(keys[p], kNoKey) << p;
  }

  std::vector<int32_t> small(10), small_keys(10);
  Status too_small = t.fill_read_row(small, small_keys);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.error().code(), ErrorCode::kCapacity);

  std::vector<int32_t> write(3);
  ASSERT_TRUE(t.fill_write(15, write).ok());
  EXPECT_EQ(write, (std::vector<int32_t>{31, 32, 33}));
  Status past = t.fill_write(16, write);  // position 18 is not appended
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code(), ErrorCode::kInvalidInput);
}

TEST(BlockTable, ReleaseAndDestructionGiveTheBlocksBack) {
  BlockPool pool(6);
  {
    BlockTable a(pool, WeightsIdentity{1});
    ASSERT_TRUE(a.append(consecutive_ids(0, 40)).ok());
    EXPECT_EQ(pool.free_count(), 3);
    BlockTable b = std::move(a);  // the blocks move with the table, refcounts unchanged
    EXPECT_TRUE(a.blocks().empty());
    EXPECT_EQ(b.blocks().size(), 3u);
    EXPECT_EQ(pool.ref_count(b.blocks()[0]), 1);
    EXPECT_EQ(pool.free_count(), 3);
  }
  EXPECT_EQ(pool.free_count(), 6);
  BlockTable c(pool, WeightsIdentity{1});
  ASSERT_TRUE(c.append(consecutive_ids(0, 17)).ok());
  ASSERT_TRUE(c.release().ok());
  EXPECT_EQ(c.num_tokens(), 0);
  EXPECT_TRUE(c.blocks().empty());
  EXPECT_EQ(pool.free_count(), 6);
  ASSERT_TRUE(c.release().ok());  // releasing twice is harmless
  EXPECT_EQ(pool.free_count(), 6);
}

TEST(BlockTable, DroppedBlocksLeaveHolesThatReadsSkipAndTheirSlotsGoBack) {
  BlockPool pool(5);
  BlockTable t(pool, WeightsIdentity{1});
  ASSERT_TRUE(t.append(consecutive_ids(0, 50)).ok());  // blocks 0..3 (the last one holds 2 tokens)
  const std::vector<int32_t> held = t.blocks();
  EXPECT_EQ(pool.free_count(), 1);
  ASSERT_TRUE(t.drop_block(1).ok());
  ASSERT_TRUE(t.drop_block(2).ok());
  ASSERT_TRUE(t.drop_block(2).ok());  // a hole stays a hole; nothing is unreffed twice
  EXPECT_EQ(pool.free_count(), 3);
  EXPECT_EQ(pool.ref_count(held[1]), 0);
  EXPECT_EQ(t.live_blocks(), 2);
  EXPECT_EQ(t.live_positions(), 18);
  EXPECT_EQ(t.slot(20), -1);
  EXPECT_EQ(t.slot(49), held[3] * 16 + 1);
  EXPECT_EQ(t.blocks_needed(14), 0);  // positions keep their block index: 50 + 14 fill block 3
  EXPECT_EQ(t.blocks_needed(15), 1);

  std::vector<int32_t> row(20), keys(20);
  ASSERT_TRUE(t.fill_read_row(row, keys).ok());
  for (int32_t c = 0; c < 16; ++c) {
    EXPECT_EQ(row[static_cast<size_t>(c)], held[0] * 16 + c);
    EXPECT_EQ(keys[static_cast<size_t>(c)], c);
  }
  EXPECT_EQ(row[16], held[3] * 16);
  EXPECT_EQ(keys[16], 48);
  EXPECT_EQ(keys[17], 49);
  EXPECT_EQ(keys[18], kNoKey);

  Status past = t.drop_block(4);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code(), ErrorCode::kInvalidInput);
  ASSERT_TRUE(t.release().ok());  // skips the holes
  EXPECT_EQ(pool.free_count(), 5);
}

}  // namespace
}  // namespace kvf

