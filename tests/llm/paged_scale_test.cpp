// Paged batching at scale: for every model family fixture, a batch of 32 sequences of
// mixed lengths up to 2000 tokens through the paged driver (chunked prefill and decodes
// in shared steps, shuffled blocks from a shared pool) equals each sequence run alone on
// the contiguous cache, and the longest also alone on the oracle: the last prompt token's
// logits and every decode step's within 1e-5, and the same greedy tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <random>

#include "llm/driver.h"
#include "llm/generator.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::must;

constexpr int64_t kDecode = 4;       // greedy tokens after each prompt
constexpr double kLogitTol = 1e-5;   // max |Δ| of any logit

struct Trace {
  std::vector<std::vector<float>> logits;  // after the prompt, then after each decode
  std::vector<int32_t> tokens;             // the greedy tokens
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The two best logits are closer than the tolerance: either token may be right.
bool near_tie(const std::vector<float>& v) {
  std::vector<float> s = v;
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
  return s[0] - s[1] <= 2 * kLogitTol;
}

// The prompt's lengths: the edges (1, a block, a block ± 1, 2000) and log-uniform others.
std::vector<int64_t> mixed_lengths(std::mt19937_64& rng, int64_t longest, int n) {
  std::vector<int64_t> lens = {1, 15, 16, 17, longest};
  std::uniform_real_distribution<double> u(0.0, std::log(static_cast<double>(longest)));
  while (static_cast<int>(lens.size()) < n) lens.push_back(static_cast<int64_t>(std::exp(u(rng))));
  std::shuffle(lens.begin(), lens.end(), rng);
  return lens;
}

// Every sequence in one driver: each step takes up to `chunk` tokens of every sequence that
// has some, so prefill chunks of long prompts run beside the decodes of short ones.
std::vector<Trace> run_paged(const models::Model& m, const std::vector<std::vector<int32_t>>& prompts, int64_t longest) {
  llm::DriverOptions o;
  int64_t blocks = 0;
  for (const auto& p : prompts) blocks += (static_cast<int64_t>(p.size()) + kDecode + 15) / 16;
  o.pool_blocks = static_cast<int32_t>(blocks + 7);
  o.max_seq_len = longest + kDecode;
  o.threads = 2;
  o.return_logits = true;
  o.identity = llm::kv::weights_identity("paged_scale_test");
  llm::Driver driver(m, o);
  std::vector<llm::SeqId> ids;
  std::map<llm::SeqId, size_t> index;
  for (const auto& p : prompts) {
    ids.push_back(*must(driver.open(p, kDecode, {})).seq);
    index[ids.back()] = index.size();
  }
  std::vector<Trace> out(prompts.size());
  const int64_t chunk = 256;
  for (;;) {
    std::vector<llm::RowRequest> rows;
    for (llm::SeqId s : ids) {
      const int64_t n = std::min(driver.pending_tokens(s), chunk);
      if (n == 0 || driver.finished(s)) continue;
      EXPECT_FALSE(must(driver.reserve(s, n)).has_value());
      rows.push_back({s, n});
    }
    if (rows.empty()) break;
    const std::vector<llm::RowResult> res = must(driver.step(rows));
    for (const llm::RowResult& r : res) {
      if (!r.token) continue;
      Trace& t = out[index.at(r.seq)];
      t.logits.push_back(r.logits);
      t.tokens.push_back(*r.token);
    }
    EXPECT_TRUE(driver.commit(res).ok());
  }
  for (llm::SeqId s : ids) EXPECT_TRUE(driver.release(s, llm::ReleaseReason::kFinished).ok());
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
  return out;
}

// The sequence alone on a contiguous cache, fed the paged run's tokens (so one near-tie
// cannot send the two runs down different continuations); its logits at each step.
std::vector<std::vector<float>> run_alone(const models::Model& m, const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& tokens, llm::ExecutorKind executor) {
  llm::GeneratorOptions o;
  o.executor = executor;
  o.last_logits = true;
  o.threads = 2;
  llm::Generator gen(m, static_cast<int64_t>(prompt.size()) + kDecode, o);
  std::vector<std::vector<float>> out;
  out.push_back(must(gen.step(prompt)));
  for (size_t i = 0; i + 1 < tokens.size(); ++i) out.push_back(must(gen.step({tokens[i]})));
  return out;
}

void expect_same(const Trace& paged, const std::vector<std::vector<float>>& alone, const std::string& what) {
  ASSERT_EQ(paged.logits.size(), alone.size()) << what;
  for (size_t i = 0; i < alone.size(); ++i) {
    const std::vector<double> a(paged.logits[i].begin(), paged.logits[i].end()), b(alone[i].begin(), alone[i].end());
    EXPECT_LE(testing::max_abs_diff(a, b), kLogitTol) << what << " step " << i;
    if (!near_tie(alone[i])) {
      EXPECT_EQ(paged.tokens[i], argmax(alone[i])) << what << " step " << i;
    }
  }
}

class PagedScale : public ::testing::TestWithParam<const char*> {};

TEST_P(PagedScale, ThirtyTwoMixedLengthsUpTo2000EqualEachAloneAndTheOracle) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model(GetParam());
  // A learned position table (gpt2) has no row past its context. The sanitizer build takes
  // 320 tokens (still 20 blocks of 16 for the longest row, and the 1/15/16/17 edges).
  const int64_t cap = testing::kSanitized ? 320 : 2000;
  const int64_t longest = m.config.learned_positions ? std::min(cap, m.config.context - kDecode) : cap;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t len : mixed_lengths(rng, longest, 32)) prompts.push_back(testing::random_ids(rng, len, m.config.vocab));
  const std::vector<Trace> paged = run_paged(m, prompts, longest);
  // A batch of one: the longest prompt with nothing beside it.
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (static_cast<int64_t>(prompts[i].size()) != longest) continue;
    const Trace one = run_paged(m, {prompts[i]}, longest)[0];
    EXPECT_EQ(one.tokens, paged[i].tokens) << GetParam();
    expect_same(one, paged[i].logits, str_cat(GetParam(), " batch of 1 vs 32"));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(paged[i].tokens.size(), static_cast<size_t>(kDecode));
    expect_same(paged[i], run_alone(m, prompts[i], paged[i].tokens, llm::ExecutorKind::kCpu),
                str_cat(GetParam(), " cpu, prompt ", prompts[i].size()));
  }
  // The oracle (which materializes every [H, L, L] intermediate) on the longest prompt up
  // to 512 tokens and on 17; OracleAt2000 below takes one family to 2000.
  int64_t oracle_len = 17;
  for (const auto& p : prompts) {
    const auto len = static_cast<int64_t>(p.size());
    if (len <= 512) oracle_len = std::max(oracle_len, len);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto len = static_cast<int64_t>(prompts[i].size());
    if (len != oracle_len && len != 17) continue;
    expect_same(paged[i], run_alone(m, prompts[i], paged[i].tokens, llm::ExecutorKind::kOracle),
                str_cat(GetParam(), " oracle, prompt ", len));
  }
}

// A 2000-token prompt beside 7 others in one paged batch, against the oracle alone (GQA
// llama fixture; ~15 s, most of it the oracle's 2000 x 2000 score tensors). The sanitizer
// build takes 600 tokens (still 38 blocks).
TEST(PagedScale, OracleAt2000) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("llama");
  std::vector<std::vector<int32_t>> prompts;
  const int64_t longest = testing::kSanitized ? 600 : 2000;
  for (int64_t len : {longest, int64_t{1}, int64_t{33}, int64_t{700}, int64_t{16}, int64_t{5}, int64_t{1234}, int64_t{17}}) {
    prompts.push_back(testing::random_ids(rng, len, m.config.vocab));
  }
  const std::vector<Trace> paged = run_paged(m, prompts, 2000);
  expect_same(paged[0], run_alone(m, prompts[0], paged[0].tokens, llm::ExecutorKind::kOracle),
              str_cat("llama oracle, prompt ", longest));
}

INSTANTIATE_TEST_SUITE_P(Families, PagedScale,
                         ::testing::Values("synthetic:llama-260k", "llama", "mistral", "qwen2", "qwen3", "gemma2", "gpt2",
                                           "bloom", "deepseek_v2"),
                         [](const auto& info) { return testing::as_test_name(info.param); });

}  // namespace
}  // namespace kvf
