// Paged KV bookkeeping under random traffic: 10,000 operations (open with a prefix match,
// append, commit, finish, cancel) over many sequences. A simulated pool records which
// prefix each slot's K/V was computed from, so a hit that serves the wrong K/V fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "llm/kv/block_pool.h"
#include "llm/kv/block_table.h"
#include "llm/kv/prefix_cache.h"
#include "testing.h"

namespace kvf {
namespace {

using llm::kv::BlockPool;
using llm::kv::BlockTable;
using llm::kv::kBlockTokens;
using llm::kv::PrefixCache;
using llm::kv::WeightsIdentity;

constexpr uint64_t kUnwritten = 0;  // a slot whose K/V no step has written yet

// What the K/V at position p stands for: the weights and every token up to p. A test-side
// mixer, independent of the cache's hash.
uint64_t extend(uint64_t fp, int32_t token) {
  fp = (fp ^ static_cast<uint32_t>(token)) * 0x100000001b3ull;
  fp ^= fp >> 29;
  return fp | 1;  // never kUnwritten
}

struct Seq {
  BlockTable table;
  int64_t written = 0;  // positions whose K/V a step has produced
};

class KvTraffic {
 public:
  KvTraffic(uint64_t seed, int32_t num_blocks)
      : rng_(seed), pool_(num_blocks), cache_(pool_), slots_(static_cast<size_t>(pool_.pool_slots()), kUnwritten) {
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> base(static_cast<size_t>(uniform(16, 90)));
      for (int32_t& t : base) t = uniform(0, 999);
      bases_.push_back(std::move(base));
    }
  }

  void step() {
    const int op = uniform(0, 99);
    if (op < 25) open();
    else if (op < 55) append();
    else if (op < 75) run(pick(), /*commit=*/true);
    else if (op < 88) finish(pick(), /*commit=*/true);
    else finish(pick(), /*commit=*/false);  // cancel: the appended tokens never ran
  }

  void release_all() {
    while (!seqs_.empty()) finish(0, false);
  }

  // Refcounts equal the number of tables holding each block; every block is held or free.
  void check_invariants() const {
    std::vector<int32_t> holders(static_cast<size_t>(pool_.num_blocks()), 0);
    for (const auto& s : seqs_) {
      const BlockTable& t = s->table;
      ASSERT_EQ(static_cast<int64_t>(t.blocks().size()), (t.num_tokens() + kBlockTokens - 1) / kBlockTokens);
      ASSERT_LE(t.committed_blocks(), t.num_full_blocks());
      std::vector<int32_t> sorted = t.blocks();
      std::sort(sorted.begin(), sorted.end());
      ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a table holds a block twice";
      for (int32_t b : t.blocks()) ++holders[static_cast<size_t>(b)];
    }
    int32_t in_use = 0;
    for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
      ASSERT_EQ(pool_.ref_count(b), holders[static_cast<size_t>(b)]) << "block " << b;
      in_use += holders[static_cast<size_t>(b)] > 0;
    }
    ASSERT_EQ(pool_.free_count() + in_use, pool_.num_blocks());
    const std::vector<int32_t> queue = pool_.free_queue();
    ASSERT_EQ(static_cast<int32_t>(queue.size()), pool_.free_count());
    for (int32_t b : queue) ASSERT_EQ(pool_.ref_count(b), 0);
  }

  const BlockPool& pool() const { return pool_; }
  const PrefixCache& cache() const { return cache_; }
  int refusals = 0;
  int opened = 0;

 private:
  int32_t uniform(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  size_t pick() { return seqs_.empty() ? 0 : static_cast<size_t>(uniform(0, static_cast<int32_t>(seqs_.size()) - 1)); }

  WeightsIdentity identity() { return uniform(0, 4) == 0 ? WeightsIdentity{0xada} : WeightsIdentity{0xba5e}; }

  // A prefix of a shared base prompt and a short private tail; never empty.
  std::vector<int32_t> prompt() {
    const std::vector<int32_t>& base = bases_[static_cast<size_t>(uniform(0, 3))];
    std::vector<int32_t> p(base.begin(), base.begin() + uniform(0, static_cast<int32_t>(base.size())));
    const int32_t tail = uniform(p.empty() ? 1 : 0, 20);
    for (int32_t i = 0; i < tail; ++i) p.push_back(uniform(0, 49));
    return p;
  }

  uint64_t fingerprint(const BlockTable& t, int64_t pos) const {
    uint64_t fp = t.identity().value;
    for (int64_t p = 0; p <= pos; ++p) fp = extend(fp, t.tokens()[static_cast<size_t>(p)]);
    return fp;
  }

  void open() {
    if (seqs_.size() >= 12) return;
    const std::vector<int32_t> p = prompt();
    const int32_t free_before = pool_.free_count();
    auto seq = std::make_unique<Seq>(Seq{cache_.open(p, identity()), 0});
    BlockTable& t = seq->table;
    ASSERT_LT(t.num_tokens(), static_cast<int64_t>(p.size())) << "the last prompt token came from the cache";
    ASSERT_EQ(t.num_tokens() % kBlockTokens, 0);
    ASSERT_TRUE(std::equal(t.tokens().begin(), t.tokens().end(), p.begin()));
    // Every served slot holds the K/V of exactly this prompt's prefix under these weights.
    uint64_t fp = t.identity().value;
    for (int64_t pos = 0; pos < t.num_tokens(); ++pos) {
      fp = extend(fp, p[static_cast<size_t>(pos)]);
      ASSERT_EQ(slots_[static_cast<size_t>(t.slot(pos))], fp) << "wrong K/V served at position " << pos;
    }
    seq->written = t.num_tokens();
    if (!append_tokens(*seq, std::span(p).subspan(static_cast<size_t>(t.num_tokens())))) {
      ASSERT_TRUE(t.release().ok());
      ASSERT_EQ(pool_.free_count(), free_before);  // the revived hits went back
      return;
    }
    ++opened;
    seqs_.push_back(std::move(seq));
  }

  void append() {
    if (seqs_.empty()) return;
    std::vector<int32_t> tokens(static_cast<size_t>(uniform(0, 9) < 7 ? 1 : uniform(2, 24)));
    for (int32_t& tok : tokens) tok = uniform(0, 49);
    append_tokens(*seqs_[pick()], tokens);
  }

  // Appends (slots start unwritten); on a refusal checks nothing moved and returns false.
  bool append_tokens(Seq& s, std::span<const int32_t> tokens) {
    BlockTable& t = s.table;
    const std::vector<int32_t> blocks = t.blocks();
    const int64_t n = t.num_tokens();
    const int32_t free_before = pool_.free_count();
    const int32_t need = t.blocks_needed(static_cast<int64_t>(tokens.size()));
    Status st = t.append(tokens);
    if (!st.ok()) {
      EXPECT_EQ(st.error().code(), ErrorCode::kCapacity);
      EXPECT_GT(need, free_before);
      EXPECT_EQ(t.blocks(), blocks);
      EXPECT_EQ(t.num_tokens(), n);
      EXPECT_EQ(pool_.free_count(), free_before);
      ++refusals;
      return false;
    }
    EXPECT_EQ(pool_.free_count(), free_before - need);
    for (int64_t pos = n; pos < t.num_tokens(); ++pos) slots_[static_cast<size_t>(t.slot(pos))] = kUnwritten;
    return true;
  }

  // A step over the sequence's pending tokens writes their K/V; commit then caches full blocks.
  void run(size_t i, bool commit) {
    if (i >= seqs_.size()) return;
    Seq& s = *seqs_[i];
    for (int64_t pos = s.written; pos < s.table.num_tokens(); ++pos) {
      slots_[static_cast<size_t>(s.table.slot(pos))] = fingerprint(s.table, pos);
    }
    s.written = s.table.num_tokens();
    if (commit) {
      ASSERT_TRUE(cache_.commit(s.table).ok());
    }
  }

  void finish(size_t i, bool commit) {
    if (i >= seqs_.size()) return;
    if (commit) run(i, true);
    ASSERT_TRUE(seqs_[i]->table.release().ok());
    seqs_.erase(seqs_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  std::mt19937_64 rng_;
  BlockPool pool_;
  PrefixCache cache_;
  std::vector<uint64_t> slots_;  // [pool_slots]: the fingerprint of the K/V in each slot
  std::vector<std::vector<int32_t>> bases_;
  std::vector<std::unique_ptr<Seq>> seqs_;
};

TEST(KvRandom, TenThousandOperationsKeepTheInvariants) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed << " (KVF_TEST_SEED to replay)");
  KvTraffic traffic(seed, 24);
  const int32_t start_free = traffic.pool().free_count();
  for (int op = 0; op < 10000; ++op) {
    traffic.step();
    if (::testing::Test::HasFatalFailure()) FAIL() << "at operation " << op;
    traffic.check_invariants();
    if (::testing::Test::HasFailure()) FAIL() << "after operation " << op;
  }
  traffic.release_all();
  traffic.check_invariants();
  EXPECT_EQ(traffic.pool().free_count(), start_free);
  for (int32_t b = 0; b < traffic.pool().num_blocks(); ++b) EXPECT_EQ(traffic.pool().ref_count(b), 0);
  // The run exercised what it claims to: hits, evictions and refusals all happened.
  EXPECT_GT(traffic.cache().hit_tokens(), 0);
  EXPECT_GT(traffic.cache().evictions(), 0);
  EXPECT_GT(traffic.refusals, 0);
  EXPECT_GT(traffic.opened, 100);
}

}  // namespace
}  // namespace kvf
