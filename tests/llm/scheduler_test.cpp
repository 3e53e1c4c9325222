// The scheduler's hooks for a server: every sampled token is reported once, in order, as
// it is drawn; a request cancelled while waiting or while running gives its blocks back
// and leaves the others' tokens unchanged; the steady decode rate counts only decode steps
// on a shape that had run before.
#include <gtest/gtest.h>

#include <map>

#include "llm/driver.h"
#include "llm/scheduler.h"
#include "models/model.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

llm::DriverOptions options(int32_t blocks) { return testing::test_driver(blocks, 64, "scheduler_test"); }

std::vector<llm::Request> requests(int n) {
  std::vector<llm::Request> rs;
  for (int i = 0; i < n; ++i) {
    rs.push_back({str_cat("r", i), std::vector<int32_t>(static_cast<size_t>(5 + 3 * i), 7 + i), 12, {}});
  }
  return rs;
}

TEST(Scheduler, OnTokenReportsEveryGeneratedTokenInOrder) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, options(32));
  std::map<std::string, std::vector<int32_t>> streamed;
  llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 4,
                                .on_token = [&](const std::string& id, const llm::RowResult& r) {
                                  streamed[id].push_back(*r.token);
                                }});
  for (const llm::Request& r : requests(5)) sched.submit(r);
  const std::vector<llm::Completion> done = testing::must(sched.run());
  ASSERT_EQ(done.size(), 5u);
  for (const llm::Completion& c : done) EXPECT_EQ(streamed.at(c.id), c.ids) << c.id;
}

TEST(Scheduler, CancelledRequestsGiveTheirBlocksBackAndChangeNoOtherOutput) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::map<std::string, std::vector<int32_t>> alone;
  {
    llm::Driver driver(m, options(32));
    llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 2});
    for (const llm::Request& r : requests(4)) sched.submit(r);
    for (const llm::Completion& c : testing::must(sched.run())) alone[c.id] = c.ids;
  }
  llm::Driver driver(m, options(32));
  llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 2});
  for (const llm::Request& r : requests(4)) sched.submit(r);
  testing::must(sched.step());
  testing::must(sched.step());
  EXPECT_EQ(sched.running(), 2u);
  EXPECT_EQ(sched.waiting(), 2u);
  EXPECT_TRUE(testing::must(sched.cancel("r0")));  // running
  EXPECT_TRUE(testing::must(sched.cancel("r3")));  // waiting
  EXPECT_FALSE(testing::must(sched.cancel("r3")));
  EXPECT_FALSE(testing::must(sched.cancel("nobody")));
  std::map<std::string, std::vector<int32_t>> got;
  for (const llm::Completion& c : testing::must(sched.run())) got[c.id] = c.ids;
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got.at("r1"), alone.at("r1"));
  EXPECT_EQ(got.at("r2"), alone.at("r2"));
  EXPECT_TRUE(driver.sequences().empty());
  // Prefix-cached blocks stay findable but unreferenced: every block is free to reuse.
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
}

// Two prompts of 5 tokens, 8 tokens each: one prefill step (it samples each first token),
// then 7 decode steps of 2 rows, all within the 16-position read map. The first decode step
// meets the decode shape (traced and compiled in it), so 6 steps of 2 tokens are steady.
TEST(Scheduler, SteadyDecodeLeavesOutPrefillsAndNewShapes) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, options(32));
  llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 2});
  for (int i = 0; i < 2; ++i) sched.submit({str_cat("r", i), std::vector<int32_t>(5, 3 + i), 8, {}});
  const std::vector<llm::Completion> done = testing::must(sched.run());
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(sched.steps(), 8);
  EXPECT_EQ(driver.runner().shapes_prepared(), 2);  // the prefill's and the decode's
  EXPECT_GT(driver.runner().prepare_seconds(), 0.0);
  EXPECT_EQ(sched.steady_decode().steps, 6);
  EXPECT_EQ(sched.steady_decode().tokens, 12);
  EXPECT_GT(sched.steady_decode().tokens_per_s(), 0.0);
  // The executor's share of the steady steps: some, never more than the steps took.
  EXPECT_GT(sched.steady_decode().executor_seconds, 0.0);
  EXPECT_LE(sched.steady_decode().executor_seconds, sched.steady_decode().seconds);
  EXPECT_GE(driver.runner().run_seconds(), sched.steady_decode().executor_seconds);
}

TEST(Scheduler, APrefillOnlyRunHasNoSteadyDecode) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, options(32));
  llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 2});
  for (int i = 0; i < 3; ++i) sched.submit({str_cat("r", i), std::vector<int32_t>(4, 5 + i), 1, {}});
  ASSERT_EQ(testing::must(sched.run()).size(), 3u);
  EXPECT_EQ(sched.steady_decode().steps, 0);
  EXPECT_EQ(sched.steady_decode().tokens_per_s(), 0.0);
}

}  // namespace
}  // namespace kvf
