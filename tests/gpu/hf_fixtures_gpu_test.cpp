// Every family on the GPU against transformers (the fixtures of tests/models): with f32
// compute (--dtype f32) all-position logits within 1e-4 relative, cached greedy ids equal,
// and cached decode equal to the oracle's full forward over 64 steps; with the default
// (16-bit inputs where the tensor cores run a product) the logits within 2e-2.
#include <gtest/gtest.h>

#include "cuda/gpu_testing.h"
#include "hf_fixture.h"

namespace kvf {
namespace {

class HfFixtureGpu : public ::testing::TestWithParam<const char*> {
 protected:
  static llm::GeneratorOptions options(llm::Compute compute = llm::Compute::kF32) {
    llm::GeneratorOptions o;
    o.executor = llm::ExecutorKind::kCuda;
    o.compute = compute;
    return o;
  }
};

TEST_P(HfFixtureGpu, AllPositionLogitsMatchTransformers) {
  KVF_NEED_GPU();
  testing::expect_logits_match(GetParam(), options(), 1e-4);
}

TEST_P(HfFixtureGpu, AllPositionLogitsWithHalfInputsStayWithinTheHalfBound) {
  KVF_NEED_GPU();
  testing::expect_logits_match(GetParam(), options(llm::Compute::kAuto), 2e-2);
}

TEST_P(HfFixtureGpu, CachedGreedyIdsMatchTransformers) {
  KVF_NEED_GPU();
  testing::expect_greedy_ids_match(GetParam(), options());
}

TEST_P(HfFixtureGpu, CachedDecodeEqualsFullForwardOver64Steps) {
  KVF_NEED_GPU();
  testing::expect_cached_equals_full(GetParam(), options(), 1e-5);
}

// A prefill long enough for the tensor cores (x rounded to f16 in every linear): the built-in
// model's (f16 weights) logits over 256 positions stay within f16 rounding of the CPU's f32
// path, and nearly every position predicts the same next token.
TEST(TensorCorePrefill, TheBuiltinModelStaysWithinHalfPrecisionOfTheCpu) {
  KVF_NEED_GPU();
  const testing::Fixture f = testing::read_fixture("kjv");
  const models::Model m = testing::open_fixture(f);
  std::vector<int32_t> ids;
  while (ids.size() < 256) ids.insert(ids.end(), f.input_ids.begin(), f.input_ids.end());
  ids.resize(256);
  llm::Generator cpu(m, 256), gpu(m, 256, {.executor = llm::ExecutorKind::kCuda});
  const std::vector<float> a = testing::must(cpu.step(ids)), b = testing::must(gpu.step(ids));
  const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
  int same = 0;
  const int64_t v = m.config.vocab;
  for (int64_t p = 0; p < 256; ++p) {
    const auto row = [&](const std::vector<float>& l) { return std::span<const float>(l.data() + p * v, static_cast<size_t>(v)); };
    same += llm::argmax(row(a)) == llm::argmax(row(b));
  }
  std::printf("[ tc prefill ] kjv, 256 positions: rel %.2e, same argmax at %d\n", rel, same);
  EXPECT_LE(rel, 5e-3);
  EXPECT_GE(same, 250);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFixtureGpu,
                         ::testing::Values("llama", "llama3_scaled", "mistral", "qwen2", "qwen3", "gemma2", "gpt2",
                                           "bloom", "deepseek_v2", "deepseek_v2_qlora", "deepseek_v2_moe", "mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "gemma3", "phi3", "kjv",
                                           "qwen3_moe_routed", "qwen2_moe_routed", "deepseek_v32"));

}  // namespace
}  // namespace kvf
