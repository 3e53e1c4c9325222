// Cache relief under windows (docs/kv.md): a model whose every layer slides, and the
// StreamingLLM policy (sinks + window) on any model. The paged driver frees the blocks
// behind every window and must still produce what the contiguous cache (which keeps
// everything and only masks) produces, and what transformers produces for the fixtures.
#include <gtest/gtest.h>

#include <cctype>
#include <random>

#include "hf_fixture.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/scheduler.h"
#include "models/model.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::must;
using testing::random_ids;

int64_t blocks(int64_t tokens) { return (tokens + llm::kv::kBlockTokens - 1) / llm::kv::kBlockTokens; }

// Greedy tokens of the request alone on a contiguous cache under the same window policy.
std::vector<int32_t> contiguous_greedy(const models::Model& m, const std::vector<int32_t>& prompt, int64_t max_new,
                                       int64_t window, int64_t sinks) {
  llm::GeneratorOptions o;
  o.last_logits = true;
  o.threads = 2;
  o.window = window;
  o.sinks = sinks;
  llm::Generator gen(m, static_cast<int64_t>(prompt.size()) + max_new, o);
  llm::Sampler greedy(llm::SamplerConfig{});
  std::vector<int32_t> history = prompt, out, in = prompt;
  while (static_cast<int64_t>(out.size()) < max_new) {
    const std::vector<float> logits = must(gen.step(in));
    out.push_back(greedy.sample(logits, history));
    history.push_back(out.back());
    in = {out.back()};
  }
  return out;
}

llm::DriverOptions driver_options(int32_t pool_blocks, int64_t max_seq_len, int64_t window, int64_t sinks) {
  llm::DriverOptions o = testing::test_driver(pool_blocks, max_seq_len, "window_test");
  o.window = window;
  o.sinks = sinks;
  return o;
}

TEST(AttentionReach, IsTheWidestLayerWindowOrNothing) {
  models::ModelConfig c;
  c.n_layers = 4;
  EXPECT_EQ(llm::attention_reach(c, 0), 0);
  EXPECT_EQ(llm::attention_reach(c, 32), 32);  // the policy bounds every layer
  c.sliding_window = 16;                        // every layer slides (mistral)
  EXPECT_EQ(llm::attention_reach(c, 0), 16);
  EXPECT_EQ(llm::attention_reach(c, 8), 8);
  EXPECT_EQ(llm::attention_reach(c, 64), 16);
  c.layer_sliding = {true, false, true, false};  // gemma2: full layers see everything
  EXPECT_EQ(llm::attention_reach(c, 0), 0);
  EXPECT_EQ(llm::attention_reach(c, 64), 64);
}

// The StreamingLLM policy on every family: paged (blocks freed) == contiguous (masked only),
// sequences well past window + sinks, several at once in chunks, and the pool never holds
// more than each sequence's sinks, window and one chunk.
class StreamingFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamingFamilies, PagedFreesBehindTheWindowAndEqualsTheContiguousCache) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model(GetParam());
  const int64_t window = 24, sinks = 4, chunk = 16, max_new = 40;
  const std::vector<int64_t> prompt_lens = {5, 37, 70};
  llm::Driver driver(m, driver_options(64, 128, window, sinks));
  llm::Scheduler sched(driver, {.max_batch_tokens = chunk, .max_rows = 8});
  std::vector<llm::Request> reqs;
  for (int64_t len : prompt_lens) {
    reqs.push_back({str_cat("r", reqs.size()), random_ids(rng, len, m.config.vocab), max_new, {}});
    sched.submit(reqs.back());
  }
  std::map<std::string, std::vector<int32_t>> got;
  while (!sched.idle()) {
    for (const llm::Completion& c : must(sched.step())) got[c.id] = c.ids;
    const int64_t per_seq = blocks(sinks) + blocks(window + chunk) + 1;
    ASSERT_LE(driver.total_blocks() - driver.free_blocks(), per_seq * static_cast<int64_t>(reqs.size()));
  }
  for (const llm::Request& r : reqs) {
    EXPECT_EQ(got.at(r.id), contiguous_greedy(m, r.prompt, max_new, window, sinks)) << GetParam() << " " << r.id;
  }
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
}

INSTANTIATE_TEST_SUITE_P(Families, StreamingFamilies,
                         ::testing::Values("synthetic:llama-260k", "llama", "mistral", "qwen2", "gemma2", "gpt2", "bloom",
                                           "deepseek_v2"),
                         [](const auto& info) { return testing::as_test_name(info.param); });

// The sinks matter: with them the output differs from the window alone (else the test
// above could pass with the sinks ignored on both sides).
TEST(Streaming, SinksChangeWhatAWindowedModelSays) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("llama");
  const std::vector<int32_t> prompt = random_ids(rng, 48, m.config.vocab);
  const std::vector<float> none = must(llm::Generator(m, 48, {}).step(prompt));
  llm::GeneratorOptions windowed;
  windowed.window = 8;
  const std::vector<float> window_only = must(llm::Generator(m, 48, windowed).step(prompt));
  windowed.sinks = 4;
  const std::vector<float> with_sinks = must(llm::Generator(m, 48, windowed).step(prompt));
  // Rows 0..7 see the same keys under every policy; row 47 does not.
  const auto row = [&](const std::vector<float>& l, int64_t r) {
    return std::vector<float>(l.begin() + r * m.config.vocab, l.begin() + (r + 1) * m.config.vocab);
  };
  EXPECT_EQ(row(window_only, 7), row(none, 7));
  EXPECT_NE(row(window_only, 47), row(none, 47));
  EXPECT_NE(row(with_sinks, 47), row(window_only, 47));
}

// Model windows against transformers: the fixture's 48 tokens (window 16) one token per
// paged step, every position's logits compared. Mistral slides on every layer, so its
// blocks behind the window go back as it goes; gemma2's full layers keep them all.
class WindowFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(WindowFixture, PagedStepsMatchTransformersPastTheWindow) {
  const testing::Fixture f = testing::read_fixture(GetParam());
  const models::Model m = testing::open_test_model(GetParam());
  ASSERT_GT(m.config.sliding_window, 0);
  ASSERT_GT(static_cast<int64_t>(f.input_ids.size()), 2 * m.config.sliding_window);
  llm::DriverOptions o = driver_options(16, 64, 0, 0);
  o.return_logits = true;
  llm::Driver driver(m, o);
  const llm::SeqId s = *must(driver.open(f.input_ids, 0, {})).seq;
  const int64_t vocab = m.config.vocab;
  std::vector<double> ours, ref(f.logits.values.begin(), f.logits.values.end());
  int32_t peak_live = 0;
  for (size_t p = 0; p < f.input_ids.size(); ++p) {
    ASSERT_FALSE(must(driver.reserve(s, 1)).has_value());
    const std::vector<llm::RowResult> r = must(driver.step({{s, 1}}));
    ASSERT_EQ(static_cast<int64_t>(r[0].logits.size()), vocab);
    ours.insert(ours.end(), r[0].logits.begin(), r[0].logits.end());
    peak_live = std::max(peak_live, driver.total_blocks() - driver.free_blocks());
  }
  const double rel = testing::rel_error(ours, ref);
  std::printf("[ window   ] %s: rel %.2e, peak blocks %d of %zu tokens\n", GetParam(), rel, peak_live,
              f.input_ids.size());
  EXPECT_LE(rel, 1e-4);
  const bool every_layer_slides = llm::attention_reach(m.config, 0) > 0;
  const int64_t all = blocks(static_cast<int64_t>(f.input_ids.size()));
  if (every_layer_slides) {
    EXPECT_LE(peak_live, blocks(m.config.sliding_window) + 1);
  } else {
    EXPECT_EQ(peak_live, all);
  }
  ASSERT_TRUE(driver.release(s, llm::ReleaseReason::kFinished).ok());
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WindowFixture, ::testing::Values("mistral", "gemma2"));

// Over 4k tokens a sliding-window model holds a window of blocks, not the sequence: 4096
// generated tokens through a pool of 4 blocks (64 slots), past the fixture's 128-position
// context (rotary positions need no table), equal to the contiguous cache's greedy tokens.
TEST(Window, FourThousandTokensThroughFourBlocks) {
  const models::Model m = testing::open_test_model("mistral");
  ASSERT_EQ(m.config.sliding_window, 16);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5};
  const int64_t max_new = 4096;
  llm::Driver driver(m, driver_options(4, 4200, 0, 0));
  llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 1});
  sched.submit({"long", prompt, max_new, {}});
  std::vector<llm::Completion> done;
  while (!sched.idle()) {
    for (llm::Completion& c : must(sched.step())) done.push_back(std::move(c));
    ASSERT_LE(driver.total_blocks() - driver.free_blocks(), 3);
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].ids.size(), static_cast<size_t>(max_new));
  EXPECT_EQ(done[0].preemptions, 0);
  EXPECT_EQ(done[0].ids, contiguous_greedy(m, prompt, max_new, 0, 0));
  EXPECT_LE(driver.peak_used_blocks(), 3);
}

// A prefix hit under a window: the cached blocks a window already passed serve a later
// prompt (they were offered to the cache before they went back), and the output is the
// cold run's.
TEST(Window, BlocksFreedBehindTheWindowStillServePrefixHits) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("mistral");
  const std::vector<int32_t> prompt = random_ids(rng, 70, m.config.vocab);
  llm::Driver driver(m, driver_options(16, 128, 0, 0));
  llm::Scheduler sched(driver, {.max_batch_tokens = 32, .max_rows = 2});
  sched.submit({"cold", prompt, 8, {}});
  const std::vector<llm::Completion> cold = must(sched.run());
  sched.submit({"warm", prompt, 8, {}});
  const std::vector<llm::Completion> warm = must(sched.run());
  ASSERT_EQ(cold.size(), 1u);
  ASSERT_EQ(warm.size(), 1u);
  EXPECT_EQ(warm[0].prefix_hit_tokens, 64);
  EXPECT_EQ(warm[0].ids, cold[0].ids);
  EXPECT_EQ(cold[0].ids, contiguous_greedy(m, prompt, 8, 0, 0));
}

}  // namespace
}  // namespace kvf
