// DeepSeek-V3.2's sparse-attention indexer on its transformers fixture (tests/fixtures/
// deepseek_v32: index_topk 16, a 48-token input). Beside the family tests (logits, greedy
// ids, cached == full, paged steps, GGUF): the selection is what makes the logits match (the
// same weights attending densely agree only before position 16), transformers' greedy ids
// come out of the paged driver under preemption and prefix hits, and what the indexer cannot
// take is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "hf_fixture.h"
#include "llm/driver.h"
#include "llm/scheduler.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

constexpr int64_t kTopK = 16;  // the fixture's index_topk

llm::DriverOptions small_pool(int32_t blocks) { return testing::test_driver(blocks, 64, "sparse_indexer_test"); }

// Relative L2 error of each row of `ours` against the fixture's logits.
std::vector<double> row_errors(const std::vector<float>& ours, const testing::Fixture& f, int64_t vocab) {
  std::vector<double> err;
  for (size_t r = 0; r < f.input_ids.size(); ++r) {
    const size_t at = r * static_cast<size_t>(vocab);
    const std::vector<double> a(ours.begin() + static_cast<std::ptrdiff_t>(at),
                                ours.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(vocab)));
    const std::vector<double> b(f.logits.values.begin() + static_cast<std::ptrdiff_t>(at),
                                f.logits.values.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(vocab)));
    err.push_back(testing::rel_error(a, b));
  }
  return err;
}

TEST(SparseIndexer, TheSelectionIsWhatMatchesTransformers) {
  const testing::Fixture f = testing::read_fixture("deepseek_v32");
  models::Model m = testing::open_fixture(f);
  ASSERT_EQ(m.config.index_topk, kTopK);
  const int64_t n = static_cast<int64_t>(f.input_ids.size()), vocab = m.config.vocab;
  llm::Generator sparse(m, n, {});
  const std::vector<double> sparse_err = row_errors(testing::must(sparse.step(f.input_ids)), f, vocab);
  m.config.index_topk = n;  // every causal key: dense attention over the same weights
  llm::Generator dense(m, n, {});
  const std::vector<double> dense_err = row_errors(testing::must(dense.step(f.input_ids)), f, vocab);
  double dense_worst = 0;
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_LE(sparse_err[static_cast<size_t>(r)], 1e-4) << "row " << r;
    if (r < kTopK) EXPECT_LE(dense_err[static_cast<size_t>(r)], 1e-4) << "row " << r << " sees at most top-k keys";
    else dense_worst = std::max(dense_worst, dense_err[static_cast<size_t>(r)]);
  }
  EXPECT_GT(dense_worst, 1e-2) << "past position " << kTopK << " the indexer drops keys";
}

// transformers' greedy continuation of the fixture's prompt, batched with five other
// requests in a pool too small for all of them: preempted, recomputed, same ids.
TEST(SparseIndexer, PagedWithPreemptionGivesTransformersGreedyIds) {
  const testing::Fixture f = testing::read_fixture("deepseek_v32");
  const models::Model m = testing::open_fixture(f);
  std::mt19937_64 rng(testing::test_seed());
  std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  reqs.push_back({"fixture", f.prompt_ids, static_cast<int64_t>(f.greedy_ids.size()), {}});
  llm::Driver driver(m, small_pool(8));  // 128 slots for 7 sequences of up to 55 tokens
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 32});
  const auto got = testing::run_scheduled(sched, reqs);
  EXPECT_GT(sched.preemptions(), 0);
  EXPECT_EQ(got.at("fixture").ids, f.greedy_ids);
  for (const llm::Request& r : reqs) EXPECT_EQ(got.at(r.id).ids, testing::solo(m, r, 64)) << r.id;
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
}

// Prefix hits reuse the indexer's keys with the latent: later requests skip 32 prompt tokens
// and still decode what each alone decodes.
TEST(SparseIndexer, PrefixHitsCarryTheIndexerKeys) {
  const models::Model m = testing::open_test_model("deepseek_v32");
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<int32_t> shared = testing::random_ids(rng, 40, m.config.vocab);
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = shared;
    const std::vector<int32_t> tail = testing::random_ids(rng, 2 + i, m.config.vocab);
    p.insert(p.end(), tail.begin(), tail.end());
    reqs.push_back({str_cat("p", i), p, 12, {}});
  }
  llm::Driver driver(m, small_pool(32));
  llm::Scheduler sched(driver, {.max_batch_tokens = 256, .max_rows = 1});  // one at a time: later ones hit
  const auto got = testing::run_scheduled(sched, reqs);
  EXPECT_EQ(got.at("p1").prefix_hit_tokens, 32);
  EXPECT_EQ(got.at("p2").prefix_hit_tokens, 32);
  for (const llm::Request& r : reqs) EXPECT_EQ(got.at(r.id).ids, testing::solo(m, r, 64)) << r.id;
}

// The caches hold the latent and the indexer's keys, and nothing else: 2 layers · (32 + 8 +
// 16) elements a token, contiguous and paged, f32 and f16.
TEST(SparseIndexer, CachesHoldTheLatentAndTheIndexerKeys) {
  const models::Model m = testing::open_test_model("deepseek_v32");
  EXPECT_EQ(models::kv_bill_bytes(m.config, 1, 4), 2 * (32 + 8 + 16) * 4);
  for (DType kv : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(kv));
    const int64_t elem = kv == DType::kF16 ? 2 : 4, cap = 40;
    llm::Generator gen(m, cap, {.threads = 2, .kv_dtype = kv});
    ASSERT_TRUE(gen.step({1, 2, 3}).ok());
    EXPECT_EQ(gen.state_bytes(), models::kv_bill_bytes(m.config, cap, elem));
    llm::DriverOptions o = small_pool(6);
    o.kv_dtype = kv;
    llm::Driver driver(m, o);
    const llm::Opened opened = testing::must(driver.open({5, 6, 7, 8, 9}, 4, {}));
    ASSERT_TRUE(opened.seq.has_value());
    ASSERT_TRUE(driver.step({{*opened.seq, 5}}).ok());
    EXPECT_EQ(driver.state_bytes(), models::kv_bill_bytes(m.config, 6 * llm::kv::kBlockTokens, elem));
  }
}

TEST(SparseIndexer, AStreamingWindowIsRefused) {
  const models::Model m = testing::open_test_model("deepseek_v32");
  llm::Generator gen(m, 64, {.window = 16, .sinks = 4});
  Result<std::vector<float>> r = gen.step({3, 4, 5});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported) << r.error().to_string();
  EXPECT_TRUE(testing::mentions(r.error(), "sparse-attention indexer")) << r.error().to_string();
}

// The indexer reads MLA's query latent: a config without one, or with sizes out of range, is
// refused when the model opens.
TEST(SparseIndexer, ConfigsTheIndexerCannotRunAreRefused) {
  const std::string dir = testing::temp_dir("sparse_indexer_config");
  std::filesystem::copy(testing::fixture_dir("deepseek_v32"), dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  nlohmann::json base;
  std::ifstream(dir + "/config.json") >> base;
  for (const auto& [key, value, says] :
       {std::tuple<const char*, nlohmann::json, const char*>{"q_lora_rank", nullptr, "q_lora_rank"},
        {"index_topk", 0, "top-k"},
        {"index_n_heads", -2, "heads"},
        {"index_head_dim", 4, "rope dims"}}) {
    nlohmann::json cfg = base;
    cfg[key] = value;
    std::ofstream(dir + "/config.json") << cfg.dump();
    Result<models::Model> m = models::open_model(dir, {.with_tokenizer = false});
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_EQ(m.error().code(), ErrorCode::kInvalidInput) << m.error().to_string();
    EXPECT_TRUE(testing::mentions(m.error(), says)) << key << ": " << m.error().to_string();
  }
}

}  // namespace
}  // namespace kvf
