// Context-parallel placement (plan/kv_shards.h): positions dealt round-robin by blocks over
// ranks, and the ring prefill schedule over that placement: every causally visible
// (query block, key block) pair computed exactly once, none hidden, the ranks' work balanced.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "plan/kv_shards.h"
#include "testing.h"

namespace kvf {
namespace {

using plan::BlockPair;
using plan::KvShards;

TEST(KvShards, OwnerCountAndPositionsAgree) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (int64_t block : {1, 3, 16}) {
      const KvShards s = testing::must(KvShards::create(ranks, block));
      for (int64_t n : {0, 1, 15, 16, 17, 47, 48, 100, 257}) {
        std::vector<int64_t> all;
        for (int r = 0; r < ranks; ++r) {
          const std::vector<int64_t> mine = s.positions(r, n);
          EXPECT_EQ(static_cast<int64_t>(mine.size()), s.count(r, n)) << "rank " << r << " n " << n;
          EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
          for (int64_t p : mine) EXPECT_EQ(s.owner(p), r) << "position " << p;
          all.insert(all.end(), mine.begin(), mine.end());
        }
        std::sort(all.begin(), all.end());
        std::vector<int64_t> want(static_cast<size_t>(n));
        std::iota(want.begin(), want.end(), 0);
        EXPECT_EQ(all, want) << "every position on exactly one rank: ranks " << ranks << " block " << block;
      }
    }
  }
}

TEST(KvShards, BlocksGoRoundRobinAndSharesDifferByAtMostOneBlock) {
  const KvShards s = testing::must(KvShards::create(3, 16));
  EXPECT_EQ(s.owner(0), 0);
  EXPECT_EQ(s.owner(15), 0);
  EXPECT_EQ(s.owner(16), 1);
  EXPECT_EQ(s.owner(47), 2);
  EXPECT_EQ(s.owner(48), 0);
  EXPECT_EQ(s.positions(1, 40), (std::vector<int64_t>{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}));
  EXPECT_EQ(s.count(2, 40), 8);  // the partial block 2
  for (int64_t n = 0; n < 300; ++n) {
    int64_t lo = n, hi = 0;
    for (int r = 0; r < 3; ++r) lo = std::min(lo, s.count(r, n)), hi = std::max(hi, s.count(r, n));
    EXPECT_LE(hi - lo, 16) << "n " << n;
  }
}

TEST(KvShards, RefusesNoRanksAndEmptyBlocks) {
  Result<KvShards> none = KvShards::create(0, 16);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kInvalidInput);
  Result<KvShards> empty = KvShards::create(2, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code(), ErrorCode::kInvalidInput);
}

// Every slot of a pool on exactly one rank, at a row of that rank's share no other slot
// takes, and no share larger than rows_held.
TEST(PoolShards, EverySlotOnOneRankAtADistinctRowOfItsShare) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (int64_t block : {1, 4, 16}) {
      const plan::PoolShards s{ranks, block};
      for (int64_t pool : {block, 3 * block, 7 * block, 16 * block}) {
        std::map<std::pair<int, int64_t>, int64_t> taken;  // (rank, row) -> slot
        for (int64_t slot = 0; slot < pool; ++slot) {
          const int r = s.owner(slot);
          ASSERT_GE(r, 0);
          ASSERT_LT(r, ranks);
          EXPECT_EQ(r, (slot / block) % ranks) << "a block's slots stay together";
          const int64_t row = s.local(slot);
          EXPECT_GE(row, 0);
          EXPECT_LT(row, s.rows_held(pool)) << "slot " << slot << " of a pool of " << pool;
          EXPECT_TRUE(taken.emplace(std::pair{r, row}, slot).second) << "slot " << slot << " and " << taken[{r, row}];
        }
        EXPECT_EQ(s.rows_held(pool), (pool / block + ranks - 1) / ranks * block);
      }
    }
  }
}

TEST(PoolShards, WriteWordsKeepTheRanksOwnSlotsAndDropTheRest) {
  const plan::PoolShards s{3, 16};
  // Slots in blocks 0, 1, 2, 3, 5 and a padding word.
  const std::vector<int32_t> write = {5, 16 + 2, 32 + 15, 48, 80 + 1, -1};
  const std::vector<std::vector<int32_t>> want = {
      {5, -1, -1, 16, -1, -1},   // rank 0: blocks 0 and 3 (its rows 0.. and 16..)
      {-1, 2, -1, -1, -1, -1},   // rank 1: block 1
      {-1, -1, 15, -1, 17, -1},  // rank 2: blocks 2 and 5 (its rows 0.. and 16..)
  };
  for (int r = 0; r < 3; ++r) {
    std::vector<int32_t> got;
    for (int32_t w : write) got.push_back(s.write_word(r, w));
    EXPECT_EQ(got, want[static_cast<size_t>(r)]) << "rank " << r;
  }
}

TEST(PoolShards, ARanksColumnsAreItsSlotsAmongTheLiveOnesInOrder) {
  const plan::PoolShards s{2, 16};
  // A read row: blocks 7, 2, 4 (a prefix hit, then new blocks), then padding past len.
  std::vector<int32_t> row;
  for (int32_t b : {7, 2, 4}) {
    for (int32_t o = 0; o < 16; ++o) row.push_back(b * 16 + o);
  }
  row.resize(row.size() + 8, 0);
  const int64_t len = 40;  // block 4 holds 8 live positions
  std::vector<int64_t> even, odd;
  for (int64_t j = 16; j < 40; ++j) even.push_back(j);
  for (int64_t j = 0; j < 16; ++j) odd.push_back(j);
  EXPECT_EQ(s.columns(0, row.data(), len), even);
  EXPECT_EQ(s.columns(1, row.data(), len), odd);
  EXPECT_TRUE(s.columns(1, row.data(), 0).empty());
}

TEST(RingPrefill, EachVisiblePairExactlyOnceAndNoHiddenOne) {
  for (int ranks = 1; ranks <= 6; ++ranks) {
    const KvShards s = testing::must(KvShards::create(ranks, 16));
    for (int64_t n : {1, 16, 17, 100, 255, 256, 1000}) {
      const int64_t nb = s.blocks(n);
      std::map<std::pair<int64_t, int64_t>, int> seen;
      for (int r = 0; r < ranks; ++r) {
        for (int step = 0; step < ranks; ++step) {
          const int src = plan::ring_source(s, r, step);
          for (const BlockPair& p : plan::ring_pairs(s, n, r, step)) {
            EXPECT_LE(p.key, p.query) << "a pair the causal mask hides entirely";
            EXPECT_EQ(s.owner(p.query * 16), r) << "the query block is rank " << r << "'s";
            EXPECT_EQ(s.owner(p.key * 16), src) << "the key block arrived from rank " << src << " at step " << step;
            ++seen[{p.query, p.key}];
          }
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), nb * (nb + 1) / 2) << "ranks " << ranks << " n " << n;
      for (const auto& [pair, times] : seen) EXPECT_EQ(times, 1) << pair.first << "," << pair.second;
    }
  }
}

TEST(RingPrefill, StepZeroIsTheRanksOwnBlocksAndTheRingVisitsEveryRank) {
  const KvShards s = testing::must(KvShards::create(4, 16));
  for (int r = 0; r < 4; ++r) {
    std::vector<int> sources;
    for (int step = 0; step < 4; ++step) sources.push_back(plan::ring_source(s, r, step));
    EXPECT_EQ(sources.front(), r);
    std::sort(sources.begin(), sources.end());
    EXPECT_EQ(sources, (std::vector<int>{0, 1, 2, 3}));
  }
  // Rank 0 holds block 0 of a 16-token prompt; the other ranks hold nothing and compute nothing.
  EXPECT_EQ(plan::ring_pairs(s, 16, 0, 0), (std::vector<BlockPair>{{0, 0}}));
  for (int step = 1; step < 4; ++step) EXPECT_TRUE(plan::ring_pairs(s, 16, 0, step).empty());
  // Rank 1's query block 1 never sees rank 2's or rank 3's blocks (2, 3) of a 64-token prompt.
  EXPECT_EQ(plan::ring_pairs(s, 64, 1, 1), (std::vector<BlockPair>{{1, 0}}));
  EXPECT_TRUE(plan::ring_pairs(s, 64, 1, 2).empty());
  EXPECT_TRUE(plan::ring_pairs(s, 64, 1, 3).empty());
}

// With nb blocks over R ranks, rank r's query blocks are r, r + R, ...; block i costs i + 1
// pairs. Writing nb = cR + t (0 <= t < R), the busiest rank is t - 1 (or R - 1 when t = 0),
// the idlest is rank t, and their difference is exactly t + c(R - 1) = nb - floor(nb / R):
// less than one block row (nb pairs, the row of the last query block). Contiguous placement
// would leave rank R - 1 with about 2R - 1 times rank 0's work.
TEST(RingPrefill, WorkBalancedWithinOneBlockRow) {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    const KvShards s = testing::must(KvShards::create(ranks, 16));
    for (int64_t n = 1; n <= 16 * 70; n += 13) {
      const int64_t nb = s.blocks(n);
      std::vector<int64_t> work(static_cast<size_t>(ranks), 0);
      for (int r = 0; r < ranks; ++r) {
        for (int step = 0; step < ranks; ++step) work[static_cast<size_t>(r)] += plan::ring_pairs(s, n, r, step).size();
      }
      const auto [lo, hi] = std::minmax_element(work.begin(), work.end());
      EXPECT_EQ(*hi - *lo, nb - nb / ranks) << "ranks " << ranks << " n " << n;
      EXPECT_LE(*hi - *lo, nb) << "within one block row";
    }
  }
}

}  // namespace
}  // namespace kvf
