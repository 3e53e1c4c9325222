// StateStore::allocate under a PoolShare (a context-parallel rank's part of a paged pool):
// the key and value pools take only the rows held, every other state whole, and the memory
// check counts what is really allocated.
#include <gtest/gtest.h>

#include "exec/state.h"

namespace kvf::exec {
namespace {

ir::Value state(const std::string& name, ir::StateRole role, Shape shape) {
  ir::Value v;
  v.kind = ir::ValueKind::kState;
  v.name = name;
  v.role = role;
  v.type = {DType::kF32, std::move(shape)};
  return v;
}

ir::Graph paged_step() {
  ir::Graph g;
  g.name = "paged";
  g.values.push_back(state("k_pool.0", ir::StateRole::kKeyCache, {64, 2, 8}));
  g.values.push_back(state("v_pool.0", ir::StateRole::kValueCache, {64, 2, 8}));
  g.values.push_back(state("counts", ir::StateRole::kOther, {64, 3}));  // not a cache: whole
  return g;
}

TEST(PoolShare, PoolsTakeTheRowsHeldAndOtherStatesStayWhole) {
  StateStore store;
  ASSERT_TRUE(store.allocate(paged_step(), {.pool_slots = 64, .rows_held = 32}).ok());
  EXPECT_EQ(store.find("k_pool.0")->buf.bytes(), 32 * 2 * 8 * 4);
  EXPECT_EQ(store.find("v_pool.0")->buf.bytes(), 32 * 2 * 8 * 4);
  EXPECT_EQ(store.find("counts")->buf.bytes(), 64 * 3 * 4);
  EXPECT_EQ(store.find("k_pool.0")->type.shape[0], 64) << "the state keeps the graph's type";
  EXPECT_EQ(store.bytes(), 2 * 32 * 2 * 8 * 4 + 64 * 3 * 4);
}

TEST(PoolShare, NoShareHoldsEveryPoolWhole) {
  StateStore store;
  ASSERT_TRUE(store.allocate(paged_step()).ok());
  EXPECT_EQ(store.find("k_pool.0")->buf.bytes(), 64 * 2 * 8 * 4);
}

TEST(PoolShare, TheMemoryCheckCountsTheShare) {
  // The two pools take 8 KiB whole and 4 KiB as halves; the budget leaves 6 KiB free.
  Memory& m = host_memory();
  ir::Graph g = paged_step();
  g.values.pop_back();
  const int64_t budget = int64_t{1} << 30;
  limit_host_memory(budget, 0);
  const int64_t in_use = budget - m.available_bytes();
  limit_host_memory(in_use + 6 * 1024, 0);
  StateStore whole;
  const Status refused = whole.allocate(g);
  StateStore half;
  const Status fits = half.allocate(g, {.pool_slots = 64, .rows_held = 32});
  limit_host_memory(-1, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kCapacity);
  EXPECT_TRUE(fits.ok()) << fits.error().message();
}

}  // namespace
}  // namespace kvf::exec
