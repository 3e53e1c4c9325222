// The paged driver and the scheduler against the contiguous single-sequence Generator:
// batches of mixed lengths, prefix-cache hits, preemption by recompute under a small pool,
// and a randomized mix of driver calls after which the pool is whole again.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <random>

#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/scheduler.h"
#include "models/model.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::random_ids;
using testing::solo;

llm::DriverOptions driver_options(int32_t blocks, int64_t max_seq_len) {
  return testing::test_driver(blocks, max_seq_len, "driver_test");
}

std::map<std::string, llm::Completion> by_id(const std::vector<llm::Completion>& cs) {
  std::map<std::string, llm::Completion> m;
  for (const llm::Completion& c : cs) m.emplace(c.id, c);
  return m;
}

class DriverFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(DriverFamilies, BatchedGenerationEqualsEachRequestAlone) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model(GetParam());
  const int64_t cap = 64;
  std::vector<llm::Request> reqs;
  for (int64_t len : {1, 9, 33, 4, 16, 21}) {
    llm::Request r;
    r.id = str_cat("r", reqs.size());
    r.prompt = random_ids(rng, len, m.config.vocab);
    r.max_tokens = 7;
    if (reqs.size() % 2) r.sampler = {.temperature = 0.8, .top_k = 20, .top_p = 0.95, .min_p = 0.0,
                                      .repeat_penalty = 1.0, .repeat_last_n = 64, .seed = 1000 + reqs.size()};
    reqs.push_back(r);
  }
  llm::Driver driver(m, driver_options(64, cap));
  llm::Scheduler sched(driver, {.max_batch_tokens = 24, .max_rows = 32});  // prompts go in chunks
  for (const llm::Request& r : reqs) sched.submit(r);
  const auto got = by_id(testing::must(sched.run()));
  ASSERT_EQ(got.size(), reqs.size());
  for (const llm::Request& r : reqs) EXPECT_EQ(got.at(r.id).ids, solo(m, r, cap)) << GetParam() << " " << r.id;
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
  EXPECT_GT(sched.steps(), 7);
}

INSTANTIATE_TEST_SUITE_P(Families, DriverFamilies,
                         ::testing::Values("synthetic:llama-260k", "llama", "mistral", "qwen3", "gemma2", "gpt2", "bloom",
                                           "deepseek_v2", "deepseek_v32"),
                         [](const auto& info) { return testing::as_test_name(info.param); });

TEST(Driver, ThirtyTwoSequencesOfMixedLengthsInOneBatch) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 32; ++i) {
    reqs.push_back({str_cat("s", i), random_ids(rng, 1 + static_cast<int64_t>(rng() % 60), m.config.vocab), 4, {}});
  }
  llm::Driver driver(m, driver_options(256, 64));
  llm::Scheduler sched(driver, {.max_batch_tokens = 4096, .max_rows = 32});
  for (const llm::Request& r : reqs) sched.submit(r);
  const auto got = by_id(testing::must(sched.run()));
  for (const llm::Request& r : reqs) EXPECT_EQ(got.at(r.id).ids, solo(m, r, 64)) << r.id;
  EXPECT_EQ(sched.steps(), 4);  // one prefill of all 32, then 3 decodes of all 32
}

TEST(Driver, PrefixHitsSkipPrefillAndChangeNothing) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const std::vector<int32_t> shared = random_ids(rng, 40, m.config.vocab);
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = shared;
    const std::vector<int32_t> tail = random_ids(rng, 3 + i, m.config.vocab);
    p.insert(p.end(), tail.begin(), tail.end());
    reqs.push_back({str_cat("p", i), p, 5, {}});
  }
  reqs.push_back({"exact", shared, 5, {}});  // 40 tokens: 32 may hit, never the last token's block
  llm::Driver driver(m, driver_options(64, 64));
  llm::Scheduler sched(driver, {.max_batch_tokens = 256, .max_rows = 1});  // one at a time: later ones hit
  for (const llm::Request& r : reqs) sched.submit(r);
  const auto got = by_id(testing::must(sched.run()));
  EXPECT_EQ(got.at("p0").prefix_hit_tokens, 0);
  EXPECT_EQ(got.at("p1").prefix_hit_tokens, 32);
  EXPECT_EQ(got.at("p2").prefix_hit_tokens, 32);
  EXPECT_EQ(got.at("exact").prefix_hit_tokens, 32);
  EXPECT_EQ(driver.prefix_cache().hit_tokens(), 96);
  for (const llm::Request& r : reqs) EXPECT_EQ(got.at(r.id).ids, solo(m, r, 64)) << r.id;

  // The same requests with the cache off: same ids, no hits.
  llm::DriverOptions cold_opts = driver_options(64, 64);
  cold_opts.prefix_cache = false;
  llm::Driver cold(m, cold_opts);
  llm::Scheduler cold_sched(cold, {.max_batch_tokens = 256, .max_rows = 1});
  for (const llm::Request& r : reqs) cold_sched.submit(r);
  const auto cold_got = by_id(testing::must(cold_sched.run()));
  for (const llm::Request& r : reqs) {
    EXPECT_EQ(cold_got.at(r.id).ids, got.at(r.id).ids) << r.id;
    EXPECT_EQ(cold_got.at(r.id).prefix_hit_tokens, 0) << r.id;
  }
}

// A reload (a new identity) never hits what the old weights cached; going back to the
// old identity hits again, since those blocks are still cached.
TEST(Driver, PrefixHitsNeverCrossAWeightsIdentity) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const std::vector<int32_t> prompt = random_ids(rng, 40, m.config.vocab);
  llm::Driver driver(m, driver_options(64, 64));
  auto hit_of_one_run = [&]() {
    llm::Scheduler sched(driver, {.max_batch_tokens = 256, .max_rows = 1});
    sched.submit({"x", prompt, 2, {}});
    return testing::must(sched.run()).at(0).prefix_hit_tokens;
  };
  EXPECT_EQ(hit_of_one_run(), 0);
  EXPECT_EQ(hit_of_one_run(), 32);
  driver.set_identity(llm::kv::weights_identity("driver_test|reloaded"));
  EXPECT_EQ(hit_of_one_run(), 0);
  driver.set_identity(llm::kv::weights_identity("driver_test"));
  EXPECT_EQ(hit_of_one_run(), 32);
}

TEST(Driver, ASmallPoolPreemptsAndEverySequenceStillGetsItsSoloOutput) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  llm::Driver driver(m, driver_options(8, 64));  // 128 slots for up to 6 x 55 tokens
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 32});
  for (const llm::Request& r : reqs) sched.submit(r);
  const auto got = by_id(testing::must(sched.run()));
  EXPECT_GT(sched.preemptions(), 0);
  int preempted = 0;
  for (const llm::Request& r : reqs) {
    EXPECT_EQ(got.at(r.id).ids, solo(m, r, 64)) << r.id;
    preempted += got.at(r.id).preemptions > 0;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
}

// Steps are padded to powers of two, but never past the longest sequence: a 40-token
// prompt with max_seq_len 43 runs as one 43-token step, not a 64-token one.
TEST(Driver, PaddingStopsAtTheLongestSequence) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, driver_options(8, 43));
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 2});
  const llm::Request r{"r", std::vector<int32_t>(40, 5), 3, {}};
  sched.submit(r);
  const std::vector<llm::Completion> done = testing::must(sched.run());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].ids, solo(m, r, 43));
}

TEST(Driver, ARequestLargerThanThePoolIsRefused) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, driver_options(2, 64));
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 4});
  sched.submit({"big", std::vector<int32_t>(40, 3), 4, {}});
  Result<std::vector<llm::Completion>> r = sched.run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(r.error().message().find("does not fit in the pool of 2 blocks"), std::string::npos) << r.error().to_string();
}

// 10,000 random driver calls (2,500 in the sanitizer build), and more until every path has been
// taken: open (with shared prefixes), refuse, reserve, step, commit, release as finished,
// preempted or cancelled, resume. Invariants after each; the pool whole at the end.
TEST(Driver, RandomCallsAlwaysGiveEveryBlockBack) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::Driver driver(m, driver_options(12, 48));
  const int32_t start = driver.free_blocks();
  const std::vector<int32_t> shared = random_ids(rng, 20, m.config.vocab);
  std::vector<llm::Suspended> parked;
  int64_t opened = 0, stepped = 0, refused = 0, preempted = 0;
  const int ops = testing::kSanitized ? 2500 : 10000;
  const auto every_path_taken = [&] { return opened > 100 && stepped > 100 && refused > 0 && preempted > 0; };
  for (int op = 0; op < ops || (!every_path_taken() && op < 8 * ops); ++op) {
    const std::vector<llm::SeqId> live = driver.sequences();
    const uint64_t pick = rng() % 10;
    if (pick < 2 || live.empty()) {  // open, often on the shared prefix, or resume a parked one
      if (!parked.empty() && rng() % 2) {
        Result<llm::Opened> o = driver.resume(parked.back());
        ASSERT_TRUE(o.ok()) << o.error().to_string();
        if (o->seq) parked.pop_back();
      } else {
        std::vector<int32_t> p = rng() % 2 ? shared : std::vector<int32_t>{};
        const std::vector<int32_t> tail = random_ids(rng, 1 + static_cast<int64_t>(rng() % 12), m.config.vocab);
        p.insert(p.end(), tail.begin(), tail.end());
        Result<llm::Opened> o = driver.open(p, static_cast<int64_t>(rng() % 8), {});
        ASSERT_TRUE(o.ok()) << o.error().to_string();
        opened += o->seq.has_value();
        refused += !o->seq.has_value();
      }
    } else if (pick < 7) {  // reserve and step a random subset
      std::vector<llm::RowRequest> rows;
      for (llm::SeqId s : live) {
        const int64_t pending = driver.pending_tokens(s);
        if (pending == 0 || rng() % 3 == 0) continue;
        const int64_t n = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(pending));
        Result<std::optional<llm::NoRoom>> r = driver.reserve(s, n);
        ASSERT_TRUE(r.ok()) << r.error().to_string();
        if (!*r) rows.push_back({s, n});
      }
      if (rows.empty()) continue;
      Result<std::vector<llm::RowResult>> res = driver.step(rows);
      ASSERT_TRUE(res.ok()) << res.error().to_string();
      ASSERT_TRUE(driver.commit(*res).ok());
      ++stepped;
    } else {  // release: finished ones as finished, others cancelled or preempted
      const llm::SeqId s = live[rng() % live.size()];
      const auto why = driver.finished(s) ? llm::ReleaseReason::kFinished
                       : rng() % 2        ? llm::ReleaseReason::kPreempted
                                          : llm::ReleaseReason::kCancelled;
      Result<std::optional<llm::Suspended>> r = driver.release(s, why);
      ASSERT_TRUE(r.ok()) << r.error().to_string();
      if (*r && parked.size() < 4) parked.push_back(std::move(**r));
      preempted += why == llm::ReleaseReason::kPreempted;
    }
    ASSERT_LE(driver.free_blocks(), start);
  }
  for (llm::SeqId s : driver.sequences()) ASSERT_TRUE(driver.release(s, llm::ReleaseReason::kCancelled).ok());
  EXPECT_EQ(driver.free_blocks(), start);
  EXPECT_GT(opened, 100);
  EXPECT_GT(stepped, 100);
  EXPECT_GT(refused, 0);
  EXPECT_GT(preempted, 0);
  EXPECT_GT(driver.prefix_cache().hit_tokens(), 0);
}

}  // namespace
}  // namespace kvf
