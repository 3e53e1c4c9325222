// host_memory() under a --max-memory budget: what it reports available is the budget less
// the reserved weights and what is allocated, never more than the kernel's MemAvailable, and
// freeing gives it back.
#include <gtest/gtest.h>

#include "exec/state.h"

namespace kvf::exec {
namespace {

TEST(HostMemory, ABudgetCountsWhatIsAllocatedAndGivesItBack) {
  Memory& m = host_memory();
  const int64_t system = m.available_bytes();
  limit_host_memory(64 << 20, 16 << 20);
  const int64_t start = m.available_bytes();
  EXPECT_LE(start, int64_t{48} << 20);
  if (system >= 0) {
    EXPECT_LE(start, system);
  }
  Result<void*> p = m.allocate_zeroed(int64_t{8} << 20);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(m.available_bytes(), start - (int64_t{8} << 20));
  m.release(*p);
  EXPECT_EQ(m.available_bytes(), start);
  limit_host_memory(1 << 20, 4 << 20);  // weights beyond the budget: nothing is left
  EXPECT_EQ(m.available_bytes(), 0);
  limit_host_memory(-1, 0);
  EXPECT_GT(m.available_bytes(), int64_t{48} << 20);  // back to the kernel's figure (this machine has more)
}

TEST(HostMemory, StateBeyondTheBudgetIsRefusedBeforeAllocation) {
  limit_host_memory(1 << 20, 0);
  ir::Graph g;
  g.name = "step";
  ir::Value cache;
  cache.kind = ir::ValueKind::kState;
  cache.name = "k_cache";
  cache.type = {DType::kF32, {1, 4, 1024, 64}};  // 1 MiB exactly, plus whatever else is in use
  g.values.push_back(cache);
  cache.name = "v_cache";
  g.values.push_back(cache);
  StateStore store;
  const Status s = store.allocate(g);
  limit_host_memory(-1, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(s.error().message().find("2097152 bytes (KV caches or pools) do not fit"), std::string::npos)
      << s.error().message();
  EXPECT_EQ(store.find("k_cache"), nullptr);  // nothing half-made
}

}  // namespace
}  // namespace kvf::exec
