// Which compiled paged steps context-parallel ranks can run holding only their blocks of the
// pools (plan::check_pool_readers): every family whose attention the compiler fuses reads its
// pools only in attention eqns and writes them only through the write map; a step whose
// attention is left unfused, or that reads the write map elsewhere, is refused by name.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "llm/step_runner.h"
#include "plan/device_caps.h"
#include "plan/kv_shards.h"
#include "testing.h"

namespace kvf {
namespace {

models::StepSpec paged_step(int64_t n_tokens) {
  models::StepSpec s;
  s.n_tokens = n_tokens;
  s.rows = 2;
  s.capacity = 48;
  s.pool_slots = 128;
  s.kv_dtype = DType::kF16;
  return s;
}

class PoolReaders : public ::testing::TestWithParam<const char*> {};

TEST_P(PoolReaders, AFusedPagedStepReadsItsPoolsOnlyInAttention) {
  const models::Model m = testing::open_test_model(GetParam());
  for (int64_t n : {1, 5}) {
    SCOPED_TRACE(str_cat(n, " tokens a row"));
    const ir::Graph traced = testing::must(m.trace_step(paged_step(n)));
    const Status whole = plan::check_pool_readers(traced);  // before the compiler: pool_view's gathers
    ASSERT_FALSE(whole.ok());
    EXPECT_NE(whole.error().message().find("reads the pool"), std::string::npos) << whole.error().message();
    const plan::Plan p = testing::must(llm::compile_step(traced, plan::cpu_caps(2)));
    const Status s = plan::check_pool_readers(p.graph);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PoolReaders,
                         ::testing::Values("synthetic:llama-260k", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gpt2",
                                           "bloom", "deepseek_v2"),
                         [](const auto& info) { return testing::as_test_name(info.param); });

// Selected (sparse) attention reads the pool in its own eqns (the indexer's keys, the
// selected rows), which no rank can run over its blocks alone: refused, naming them.
TEST(PoolReaders, SelectedAttentionIsRefusedByName) {
  const models::Model m = testing::open_test_model("deepseek_v32");
  const plan::Plan p = testing::must(llm::compile_step(testing::must(m.trace_step(paged_step(1))), plan::cpu_caps(2)));
  const Status s = plan::check_pool_readers(p.graph);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("reads the pool"), std::string::npos) << s.error().message();
}

// The rank's write map is its own rows: any eqn but the pools' writes reading it is refused.
TEST(PoolReaders, AnotherReaderOfTheWriteMapIsRefused) {
  ir::Builder b("paged");
  const ir::V write = b.map_slot(ir::Slot::kWriteMap, {4}, 64);
  b.map_slot(ir::Slot::kSlotMap, {1, 8}, 64);
  b.output("doubled", write + write);
  const ir::Graph g = testing::must(b.finish());
  const Status s = plan::check_pool_readers(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("reads the write map"), std::string::npos) << s.error().message();
}

TEST(PoolReaders, AStepWithoutAReadMapPasses) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  models::StepSpec s;
  s.n_tokens = 3;
  s.capacity = 16;
  EXPECT_TRUE(plan::check_pool_readers(testing::must(m.trace_step(s))).ok());
}

}  // namespace
}  // namespace kvf
