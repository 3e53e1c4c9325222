// Sampler: greedy is argmax; each filter does what it promises; a seed fixes the draws and
// the draws follow softmax(logits / T).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "drawn_steps.h"
#include "llm/sampler.h"
#include "testing.h"

namespace kvf {
namespace {

using llm::Sampler;
using llm::SamplerConfig;

const std::vector<float> kLogits{1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f};  // best 1, then 5, 2

std::map<int32_t, int> draw(SamplerConfig cfg, int n, const std::vector<int32_t>& history = {}) {
  Sampler s(cfg);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[s.sample(kLogits, history)];
  return counts;
}

TEST(Sampler, GreedyIsArgmax) {
  EXPECT_EQ(llm::argmax(kLogits), 1);
  EXPECT_EQ(draw({}, 20), (std::map<int32_t, int>{{1, 20}}));
}

// argmax is the one left-to-right scan keeping the first strictly larger logit, whatever the
// length (a tail past its 16 lanes), ties, signed zeros, infinities and NaNs (one at 0 wins:
// nothing is larger than it).
TEST(Sampler, ArgmaxIsTheFirstStrictlyLargestOfOneScan) {
  const auto scan = [](const std::vector<float>& l) {
    size_t best = 0;
    for (size_t i = 1; i < l.size(); ++i) best = l[i] > l[best] ? i : best;
    return static_cast<int32_t>(best);
  };
  std::mt19937_64 rng(testing::test_seed());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials{nan, inf, -inf, 0.0f, -0.0f, 3.0f};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> l(1 + rng() % 70);
    for (float& x : l) {
      x = static_cast<float>(rng() % 7) - 3.0f;  // many ties
      if (rng() % 6 == 0) x = specials[rng() % specials.size()];
    }
    ASSERT_EQ(llm::argmax(l), scan(l)) << "trial " << trial;
  }
  EXPECT_EQ(llm::argmax(std::vector<float>{-0.0f, 0.0f}), 0);
  EXPECT_EQ(llm::argmax(std::vector<float>{nan, 5.0f}), 0);
  EXPECT_EQ(llm::argmax(std::vector<float>{1.0f, nan, 5.0f}), 2);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  EXPECT_EQ(draw({.temperature = 1.5, .top_k = 1, .seed = 3}, 50), (std::map<int32_t, int>{{1, 50}}));
  EXPECT_EQ(draw({.temperature = 1.5, .top_p = 0.01, .seed = 3}, 50), (std::map<int32_t, int>{{1, 50}}));
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  const auto c = draw({.temperature = 1.0, .top_k = 3, .seed = 9}, 3000);
  for (const auto& [tok, n] : c) EXPECT_TRUE(tok == 1 || tok == 5 || tok == 2) << "token " << tok;
  EXPECT_EQ(c.size(), 3u);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p_i / p_max = exp(l_i - 3) at T = 1: token 5 keeps 0.90, token 2 0.61, token 0 0.14.
  const auto c = draw({.temperature = 1.0, .min_p = 0.5, .seed = 4}, 3000);
  for (const auto& [tok, n] : c) EXPECT_TRUE(tok == 1 || tok == 5 || tok == 2) << "token " << tok;
}

TEST(Sampler, DrawsFollowTheTemperatureSoftmax) {
  const double t = 0.7;
  double z = 0;
  for (float l : kLogits) z += std::exp(l / t);
  const int n = 20000;
  const auto c = draw({.temperature = t, .seed = 12345}, n);
  for (int32_t tok = 0; tok < static_cast<int32_t>(kLogits.size()); ++tok) {
    const double p = std::exp(kLogits[static_cast<size_t>(tok)] / t) / z;
    const double got = c.count(tok) ? static_cast<double>(c.at(tok)) / n : 0.0;
    EXPECT_NEAR(got, p, 4 * std::sqrt(p * (1 - p) / n) + 1e-3) << "token " << tok;  // ~4 sigma
  }
}

TEST(Sampler, SameSeedSameDrawsOtherSeedOtherDraws) {
  auto seq = [](uint64_t seed) {
    Sampler s({.temperature = 1.0, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(kLogits, {}));
    return out;
  };
  EXPECT_EQ(seq(7), seq(7));
  EXPECT_NE(seq(7), seq(8));
}

TEST(Sampler, RepetitionPenaltyMovesTheArgmax) {
  // Penalty 1.5 divides token 1's positive logit: 3 / 1.5 = 2 < 2.9 (token 5).
  EXPECT_EQ(draw({.repeat_penalty = 1.5}, 1, {1}), (std::map<int32_t, int>{{5, 1}}));
  // Outside the look-back window it does not apply.
  EXPECT_EQ(draw({.repeat_penalty = 1.5, .repeat_last_n = 1}, 1, {1, 4}), (std::map<int32_t, int>{{1, 1}}));
  // A negative logit is multiplied: token 3 goes from -1 to -1.5 (still never chosen greedily).
  EXPECT_EQ(draw({.repeat_penalty = 1.5}, 1, {3}), (std::map<int32_t, int>{{1, 1}}));
}

}  // namespace
}  // namespace kvf

namespace kvf {
namespace {

TEST(Sampler, LogitBiasMovesTheArgmaxAndCanBanAToken) {
  EXPECT_EQ(draw({.logit_bias = {{4, 5.0f}}}, 5), (std::map<int32_t, int>{{4, 5}}));
  // -100 on the best token: greedy takes the next best; sampled never draws it.
  EXPECT_EQ(draw({.logit_bias = {{1, -100.0f}}}, 5), (std::map<int32_t, int>{{5, 5}}));
  const auto sampled = draw({.temperature = 1.0, .logit_bias = {{1, -100.0f}}, .seed = 3}, 2000);
  EXPECT_EQ(sampled.count(1), 0u);
  // Ids outside the vocabulary are ignored, not written.
  EXPECT_EQ(draw({.logit_bias = {{-1, 9.0f}, {99, 9.0f}}}, 3), (std::map<int32_t, int>{{1, 3}}));
}

TEST(Sampler, PresenceAndFrequencyPenaltiesLookOnlyAtGeneratedTokens) {
  // Token 1 leads token 5 by 0.1. In the prompt it is not penalized; generated, it is.
  const std::vector<int32_t> history{1, 1, 2};
  Sampler in_prompt({.presence_penalty = 1.0});
  EXPECT_EQ(in_prompt.sample(kLogits, history, 3), 1);
  Sampler generated({.presence_penalty = 0.2});
  EXPECT_EQ(generated.sample(kLogits, history, 0), 5);
  // Frequency scales with the count: 2 x 0.06 > 0.1, 1 x 0.06 is not.
  Sampler twice({.frequency_penalty = 0.06});
  EXPECT_EQ(twice.sample(kLogits, history, 0), 5);
  Sampler once({.frequency_penalty = 0.06});
  EXPECT_EQ(once.sample(kLogits, history, 1), 1);
}

TEST(Sampler, TokenLogprobsAreTheLogSoftmaxOfTheRawLogits) {
  double sum = 0;
  for (float x : kLogits) sum += std::exp(static_cast<double>(x));
  const llm::TokenLogprobs lp = llm::token_logprobs(kLogits, 2, 3);
  EXPECT_EQ(lp.token, 2);
  EXPECT_NEAR(lp.logprob, 2.5 - std::log(sum), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 5);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[1].second, 2.9 - std::log(sum), 1e-6);
  EXPECT_TRUE(llm::token_logprobs(kLogits, 0, 0).top.empty());
  EXPECT_EQ(llm::token_logprobs(kLogits, 0, 100).top.size(), kLogits.size());
}

// The device draw (exec/row_draw.h) from a Sampler: its edits are the sampler's bias and
// penalties (greedy through them gives sample()'s token), its uniforms are seeded like the
// sampler's own draws, and its draws follow the same softmax.
exec::StepDraws device_draws(Sampler& s, const std::vector<int32_t>& history, size_t n_prompt) {
  exec::StepDraws d;
  d.rows.push_back(s.device_draw(history, n_prompt, kLogits.size(), d.edits));
  return d;
}

TEST(Sampler, DeviceDrawEditsAreTheBiasAndPenalties) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 300; ++trial) {
    SamplerConfig cfg{.repeat_penalty = 1.0 + static_cast<double>(rng() % 3) * 0.4,
                      .repeat_last_n = static_cast<int>(rng() % 4),
                      .presence_penalty = static_cast<double>(rng() % 3) * 0.3,
                      .frequency_penalty = static_cast<double>(rng() % 3) * 0.07};
    for (int b = static_cast<int>(rng() % 3); b > 0; --b) {
      cfg.logit_bias.emplace_back(static_cast<int32_t>(rng() % 8) - 1, static_cast<float>(rng() % 7) - 3.0f);
    }
    std::vector<int32_t> history(rng() % 6);
    for (int32_t& t : history) t = static_cast<int32_t>(rng() % kLogits.size());
    const size_t n_prompt = history.empty() ? 0 : rng() % history.size();
    Sampler host(cfg), device(cfg);
    const exec::StepDraws d = device_draws(device, history, n_prompt);
    std::vector<int32_t> ids;
    ASSERT_TRUE(exec::draw_rows(kLogits, static_cast<int64_t>(kLogits.size()), d, ids).ok());
    ASSERT_EQ(ids[0], host.sample(kLogits, history, n_prompt)) << "trial " << trial;
  }
}

TEST(Sampler, DeviceDrawUniformsAreSeededAndGreedyTakesNone) {
  const auto uniforms = [](SamplerConfig cfg) {
    Sampler s(cfg);
    std::vector<float> u;
    for (int i = 0; i < 64; ++i) u.push_back(device_draws(s, {}, 0).rows[0].uniform);
    return u;
  };
  const std::vector<float> a = uniforms({.temperature = 1.0, .seed = 7});
  EXPECT_EQ(a, uniforms({.temperature = 1.0, .seed = 7}));
  EXPECT_NE(a, uniforms({.temperature = 1.0, .seed = 8}));
  for (float u : a) EXPECT_TRUE(u >= 0.0f && u < 1.0f) << u;
  EXPECT_EQ(uniforms({.seed = 7}), std::vector<float>(64, 0.0f));
}

TEST(Sampler, DeviceDrawsFollowTheTemperatureSoftmax) {
  const double t = 0.7;
  double z = 0;
  for (float l : kLogits) z += std::exp(l / t);
  Sampler s({.temperature = t, .seed = 12345});
  const int n = 20000;
  std::map<int32_t, int> c;
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(exec::draw_rows(kLogits, static_cast<int64_t>(kLogits.size()), device_draws(s, {}, 0), ids).ok());
    ++c[ids[0]];
  }
  for (int32_t tok = 0; tok < static_cast<int32_t>(kLogits.size()); ++tok) {
    const double p = std::exp(kLogits[static_cast<size_t>(tok)] / t) / z;
    EXPECT_NEAR(static_cast<double>(c[tok]) / n, p, 4 * std::sqrt(p * (1 - p) / n) + 1e-3) << "token " << tok;
  }
}

// A generator's drawn step on a host executor is draw_row of the logits its plain step gives
// (the CPU and the oracle draw on the host; a GPU draws where the logits are).
TEST(Sampler, GeneratorDrawnStepsDrawFromTheStepsLogits) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  for (const llm::ExecutorKind kind : {llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle}) {
    EXPECT_FALSE(llm::Generator(m, 64, {.executor = kind}).samples_on_device());
    testing::expect_drawn_steps_match(m, {.executor = kind, .threads = 2}, 12);
    llm::Generator wide(m, 64, {.executor = kind});  // without last_logits: refused
    exec::StepDraws one;
    one.rows.push_back({});
    EXPECT_FALSE(wide.step_draw({1, 2}, one).ok());
  }
}

}  // namespace
}  // namespace kvf
