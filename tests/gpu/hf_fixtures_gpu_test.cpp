// Every family on the GPU against transformers (the fixtures of tests/models): all-position
// logits within 1e-4 relative, cached greedy ids equal, and cached decode equal to the
// oracle's full forward over 64 steps.
#include <gtest/gtest.h>

#include "cuda/gpu_testing.h"
#include "hf_fixture.h"

namespace kvf {
namespace {

class HfFixtureGpu : public ::testing::TestWithParam<const char*> {
 protected:
  llm::GeneratorOptions options() const {
    llm::GeneratorOptions o;
    o.executor = llm::ExecutorKind::kCuda;
    return o;
  }
};

TEST_P(HfFixtureGpu, AllPositionLogitsMatchTransformers) {
  KVF_NEED_GPU();
  testing::expect_logits_match(GetParam(), options(), 1e-4);
}

TEST_P(HfFixtureGpu, CachedGreedyIdsMatchTransformers) {
  KVF_NEED_GPU();
  testing::expect_greedy_ids_match(GetParam(), options());
}

TEST_P(HfFixtureGpu, CachedDecodeEqualsFullForwardOver64Steps) {
  KVF_NEED_GPU();
  testing::expect_cached_equals_full(GetParam(), options(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFixtureGpu,
                         ::testing::Values("llama", "llama3_scaled", "mistral", "qwen2", "qwen3", "gemma2", "gpt2",
                                           "bloom", "deepseek_v2", "deepseek_v2_qlora", "kjv"));

}  // namespace
}  // namespace kvf
