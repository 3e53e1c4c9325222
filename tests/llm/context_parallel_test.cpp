// A whole model's decode attention context-parallel (exec/context_parallel.h) through
// llm::Generator, as `kvforge generate --cp N` runs it: the prefill on the CPU kernel, then
// every decode step's attention split by position over N ranks and merged. Greedy ids must
// equal the single-device run's, and every step's logits be within 1e-5 of its largest logit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "exec/context_parallel.h"
#include "llm/generator.h"
#include "llm/kv/block_pool.h"
#include "llm/sampler.h"
#include "testing.h"

namespace kvf {
namespace {

struct Run {
  std::vector<int32_t> ids;
  std::vector<float> prefill;              // the prompt's last logits
  std::vector<std::vector<float>> logits;  // each decode step's
};

// The prompt's prefill (on `cp` too with ring_prefill), then `steps` greedy one-token steps.
Run greedy(const models::Model& m, exec::AttentionBackend* cp, DType kv, const std::vector<int32_t>& prompt, int steps,
           bool ring_prefill = false) {
  llm::GeneratorOptions o;
  o.last_logits = true;
  o.kv_dtype = kv;
  o.decode_attention = cp;
  if (ring_prefill) o.prefill_attention = cp;
  llm::Generator gen(m, static_cast<int64_t>(prompt.size()) + steps + 1, o);
  Run r;
  std::vector<float> logits = testing::must(gen.step(prompt));
  r.prefill = logits;
  for (int s = 0; s < steps; ++s) {
    r.ids.push_back(llm::argmax(logits));
    logits = testing::must(gen.step({r.ids.back()}));
    r.logits.push_back(logits);
  }
  return r;
}

void expect_same_run(const models::Model& m, DType kv, const std::vector<int32_t>& prompt, int steps) {
  const Run one = greedy(m, nullptr, kv, prompt, steps);
  for (int ranks : {2, 4}) {
    auto cp = testing::must(exec::ContextParallelAttention::create(ranks, llm::kv::kBlockTokens));
    const Run split = greedy(m, cp.get(), kv, prompt, steps);
    EXPECT_EQ(split.ids, one.ids) << "ranks " << ranks;
    double worst = 0;
    for (size_t s = 0; s < one.logits.size() && s < split.logits.size(); ++s) {
      worst = std::max(worst, testing::max_error_of_largest(split.logits[s], one.logits[s]));
    }
    EXPECT_LE(worst, 1e-5) << "ranks " << ranks;
    ::testing::Test::RecordProperty(str_cat("cp", ranks, "_worst"), str_cat(worst));
    EXPECT_EQ(cp->stats().eqns, static_cast<int64_t>(steps) * m.config.n_layers) << "every decode step's attention";
    for (int64_t keys : cp->stats().keys) EXPECT_GT(keys, 0) << "every rank held keys";
  }
}

// 5 prompt tokens and 120 decode steps: up to 125 positions, 8 blocks, two on each of 4 ranks.
TEST(ContextParallelGenerate, Stories260KGreedyIdsAndLogitsEqualOneDevice) {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.bin");
  if (!path) KVF_SKIP_MISSING("stories260K not present");
  const models::Model m =
      testing::must(models::open_model(*path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  expect_same_run(m, DType::kF32, {1, 403, 407, 261, 378}, 120);
}

TEST(ContextParallelGenerate, SyntheticLlamaWithAnF16Cache) {
  const models::Model m = testing::must(models::open_model("synthetic:llama-260k", {.with_tokenizer = false}));
  expect_same_run(m, DType::kF16, {1, 2, 3, 4, 5, 6, 7}, 60);
}

// A 50-token prompt (4 blocks of 16) prefilled by the ring over 2 and 3 ranks, then decoded
// context-parallel: the one-device logits and ids, from 10 of the 16 block pairs a layer.
TEST(ContextParallelGenerate, ARingPrefillGivesTheOneDeviceRun) {
  const models::Model m = testing::must(models::open_model("synthetic:llama-260k", {.with_tokenizer = false}));
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 50; ++i) prompt.push_back(1 + (i * 37) % 200);
  const kvf::Run one = greedy(m, nullptr, DType::kF32, prompt, 8);
  for (int ranks : {2, 3}) {
    auto cp = testing::must(exec::ContextParallelAttention::create(ranks, llm::kv::kBlockTokens));
    const kvf::Run ring = greedy(m, cp.get(), DType::kF32, prompt, 8, true);
    EXPECT_LE(testing::max_error_of_largest(ring.prefill, one.prefill), 1e-5) << "ranks " << ranks;
    EXPECT_EQ(ring.ids, one.ids) << "ranks " << ranks;
    EXPECT_EQ(cp->stats().pairs, 10 * m.config.n_layers) << "ranks " << ranks;
  }
}

TEST(ContextParallelGenerate, TheOracleAndTensorParallelRefuseIt) {
  const models::Model m = testing::must(models::open_model("synthetic:llama-260k", {.with_tokenizer = false}));
  auto cp = testing::must(exec::ContextParallelAttention::create(2, llm::kv::kBlockTokens));
  llm::GeneratorOptions o;
  o.decode_attention = cp.get();
  o.executor = llm::ExecutorKind::kOracle;
  llm::Generator oracle(m, 16, o);
  Result<std::vector<float>> step = oracle.step({1});
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().code(), ErrorCode::kUnsupported);
  o.executor = llm::ExecutorKind::kCpu;
  Result<std::unique_ptr<llm::Generator>> tp = llm::Generator::open(m, 16, o, 2);
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.error().code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kvf
