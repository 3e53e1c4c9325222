// Cached decode equals the full forward: a 2-layer toy llama run token by token through
// attention_masked over a fixed-capacity cache gives the logits of one pass over the
// whole sequence (seed 003 measured ~1e-6; we hold it to 1e-5).
#include <gtest/gtest.h>

#include <cmath>

#include "models/toy_llama.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using models::ToyLlamaConfig;
using models::ToyMode;

struct DecodeCase {
  const char* name;
  int64_t window;
  ir::ops::RopeLayout layout;
  int64_t n_kv_heads;
};

std::vector<double> row(const Buffer& logits, int64_t r) {
  const int64_t vocab = logits.shape[1];
  return {logits.data.begin() + r * vocab, logits.data.begin() + (r + 1) * vocab};
}

class CachedDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(CachedDecode, EqualsFullForward) {
  const DecodeCase& c = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  ToyLlamaConfig cfg;
  cfg.vocab = 96;
  cfg.dim = 48;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.n_kv_heads = c.n_kv_heads;
  cfg.hidden_dim = 80;
  cfg.max_seq = 32;
  cfg.window = c.window;
  cfg.rope_layout = c.layout;
  const models::ToyLlamaWeights w = testing::must(models::random_toy_weights(cfg, seed));
  std::mt19937_64 rng(seed);
  const int64_t total = 24, prompt = 7;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < total; ++i) ids.push_back(static_cast<int32_t>(rng() % cfg.vocab));

  const ir::Graph full = testing::must(models::trace_toy_llama(cfg, w, total, ToyMode::kFull));
  Result<eval::Outputs> ref = testing::run_graph(full, testing::token_slots(ids, 0), eval::Precision::kNative);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const Buffer& ref_logits = ref->at("logits");

  const ir::Graph prefill = testing::must(models::trace_toy_llama(cfg, w, prompt, ToyMode::kCached));
  const ir::Graph decode = testing::must(models::trace_toy_llama(cfg, w, 1, ToyMode::kCached));
  eval::StateStore state;
  ASSERT_TRUE(eval::allocate_state(decode, state).ok());
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
  Result<eval::Outputs> pre = oracle.run(prefill, testing::token_slots({ids.begin(), ids.begin() + prompt}, 0), state);
  ASSERT_TRUE(pre.ok()) << pre.error().to_string();
  double worst = 0;
  for (int64_t r = 0; r < prompt; ++r) {
    worst = std::max(worst, testing::max_abs_diff(row(pre->at("logits"), r), row(ref_logits, r)));
  }
  for (int64_t p = prompt; p < total; ++p) {
    Result<eval::Outputs> out = oracle.run(decode, testing::token_slots({ids[p]}, static_cast<int32_t>(p)), state);
    ASSERT_TRUE(out.ok()) << out.error().to_string();
    worst = std::max(worst, testing::max_abs_diff(row(out->at("logits"), 0), row(ref_logits, p)));
  }
  EXPECT_LE(worst, 1e-5);
  // The logits are not trivially equal: they move from position to position.
  EXPECT_GT(testing::max_abs_diff(row(ref_logits, total - 1), row(ref_logits, total - 2)), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Toy, CachedDecode,
                         ::testing::Values(DecodeCase{"gqa_half_rope", 0, ir::ops::RopeLayout::kHalf, 2},
                                           DecodeCase{"mha_interleaved", 0, ir::ops::RopeLayout::kInterleaved, 4},
                                           DecodeCase{"mqa", 0, ir::ops::RopeLayout::kHalf, 1},
                                           DecodeCase{"sliding_window", 5, ir::ops::RopeLayout::kHalf, 2}),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) { return std::string(info.param.name); });

TEST(CachedDecodeCapacity, WritingPastTheCacheIsACapacityError) {
  ToyLlamaConfig cfg;
  cfg.vocab = 16;
  cfg.dim = 16;
  cfg.n_layers = 1;
  cfg.n_heads = 2;
  cfg.n_kv_heads = 1;
  cfg.hidden_dim = 24;
  cfg.max_seq = 4;
  const models::ToyLlamaWeights w = testing::must(models::random_toy_weights(cfg, 1));
  const ir::Graph decode = testing::must(models::trace_toy_llama(cfg, w, 1, ToyMode::kCached));
  eval::StateStore state;
  ASSERT_TRUE(eval::allocate_state(decode, state).ok());
  eval::Oracle oracle;
  const eval::StateStore before = state;
  Result<eval::Outputs> out = oracle.run(decode, testing::token_slots({3}, 4), state);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code(), ErrorCode::kCapacity) << out.error().to_string();
  EXPECT_EQ(state.at("k_cache.0").data, before.at("k_cache.0").data);
}

TEST(KvBill, MatchesTheSeedFormula) {
  ToyLlamaConfig cfg;  // 4 layers, 2 kv heads, head dim 32
  EXPECT_EQ(models::kv_bill_bytes(cfg.model_config(), 1000, 2), 2 * 4 * 2 * 32 * 1000 * 2);
}

}  // namespace
}  // namespace kvf
