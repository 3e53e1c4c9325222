// An f16 KV cache through the Generator: the compiled CPU path against the oracle over the
// same f16-rounded cache (the same numbers up to reassociation), against the f32 cache (the
// rounding is real and small), and its memory (half).
#include <gtest/gtest.h>

#include <cmath>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

struct Decoded {
  std::vector<std::vector<double>> logits;  // per step, the last position's row
  std::vector<int32_t> ids;                 // greedy
  int64_t state_bytes = 0;
};

Decoded greedy(const models::Model& m, llm::ExecutorKind executor, DType kv, const std::vector<int32_t>& prompt, int n) {
  llm::GeneratorOptions o;
  o.executor = executor;
  o.kv_dtype = kv;
  o.threads = 2;
  o.last_logits = true;
  llm::Generator gen(m, 64, o);
  Decoded r;
  std::vector<int32_t> next = prompt;
  for (int i = 0; i < n; ++i) {
    Result<std::vector<float>> logits = gen.step(next);
    EXPECT_TRUE(logits.ok()) << logits.error().to_string();
    if (!logits) return r;
    r.logits.emplace_back(logits->begin(), logits->end());
    r.ids.push_back(llm::argmax(*logits));
    next = {r.ids.back()};
  }
  r.state_bytes = gen.state_bytes();
  return r;
}

double worst(const Decoded& a, const Decoded& b) {
  double w = 0;
  for (size_t i = 0; i < a.logits.size() && i < b.logits.size(); ++i) w = std::max(w, testing::rel_error(a.logits[i], b.logits[i]));
  return w;
}

TEST(GeneratorKvDtype, F16CacheOnTheCpuPathMatchesTheOracle) {
  const models::Model m = testing::must(models::open_model(
      "synthetic:llama-260k", {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  const std::vector<int32_t> prompt{1, 17, 300, 42, 5, 99, 123};
  const int steps = 24;
  const Decoded cpu16 = greedy(m, llm::ExecutorKind::kCpu, DType::kF16, prompt, steps);
  const Decoded oracle16 = greedy(m, llm::ExecutorKind::kOracle, DType::kF16, prompt, steps);
  const Decoded cpu32 = greedy(m, llm::ExecutorKind::kCpu, DType::kF32, prompt, steps);
  ASSERT_EQ(cpu16.logits.size(), static_cast<size_t>(steps));
  // Teacher-forced comparisons would hide a diverging id; greedy ids must agree outright.
  EXPECT_EQ(cpu16.ids, oracle16.ids);
  // Both round the same rows into f16, but upstream reassociation (~1e-7) can put a row's
  // rounding on the neighbouring f16 (2^-11 relative), which later steps carry along.
  EXPECT_LE(worst(cpu16, oracle16), 1e-3);
  // Rounding K/V to f16 moves the logits, but only by f16's precision.
  EXPECT_LE(worst(cpu16, cpu32), 1e-2);
  EXPECT_GT(worst(cpu16, cpu32), 0.0) << "the f16 cache computed exactly the f32 numbers: nothing was rounded";
  EXPECT_EQ(2 * cpu16.state_bytes, cpu32.state_bytes);
}

// llama.cpp produced shared/models/REFERENCE.md's continuation with its default f16 cache.
TEST(GeneratorKvDtype, Stories260KWithAnF16CacheKeepsTheReference) {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.gguf");
  if (!path) KVF_SKIP_MISSING("stories260K.gguf not present");
  const models::Model m =
      testing::must(models::open_model(*path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  const std::vector<int32_t> reference{432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
  const Decoded r = greedy(m, llm::ExecutorKind::kCpu, DType::kF16, {1, 403, 407, 261, 378}, static_cast<int>(reference.size()));
  EXPECT_EQ(r.ids, reference);
}

}  // namespace
}  // namespace kvf
