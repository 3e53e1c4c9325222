// Every family against transformers: tiny random-init checkpoints made by
// tools/make_fixtures.py (tests/fixtures/<family>/), and the built-in model (kjv: the
// committed models/kjv-7m.gguf against the PyTorch model tools/kjv/train.py exported it from).
// All-position logits within 1e-4 relative, cached greedy ids equal to transformers', and
// cached decode equal to a full forward over 64 steps.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "load/npy.h"
#include "models/model.h"
#include "hf_fixture.h"
#include "models/hf_names.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::Fixture;
using testing::last_row;
using testing::read_fixture;

// Every test runs on the compiled CPU executor and on the oracle.
class HfFixture : public ::testing::TestWithParam<std::tuple<const char*, llm::ExecutorKind>> {
 protected:
  const char* family() const { return std::get<0>(GetParam()); }
  llm::GeneratorOptions options() const {
    llm::GeneratorOptions o;
    o.executor = std::get<1>(GetParam());
    return o;
  }
};

TEST_P(HfFixture, AllPositionLogitsMatchTransformers) { testing::expect_logits_match(family(), options(), 1e-4); }
TEST_P(HfFixture, CachedGreedyIdsMatchTransformers) { testing::expect_greedy_ids_match(family(), options()); }
TEST_P(HfFixture, CachedDecodeEqualsFullForwardOver64Steps) { testing::expect_cached_equals_full(family(), options(), 1e-5); }

INSTANTIATE_TEST_SUITE_P(Families, HfFixture,
                         ::testing::Combine(::testing::Values("llama", "llama3_scaled", "mistral", "qwen2", "qwen3",
                                                              "gemma2", "gpt2", "bloom", "deepseek_v2",
                                                              "deepseek_v2_qlora", "deepseek_v2_moe", "mixtral", "qwen3_moe",
                                                              "qwen2_moe", "deepseek_v3", "gemma3", "phi3", "qwen3_moe_routed",
                                                              "qwen2_moe_routed", "deepseek_v32"),
                                            ::testing::Values(llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle)),
                         [](const auto& info) {
                           return str_cat(std::get<0>(info.param),
                                          std::get<1>(info.param) == llm::ExecutorKind::kCpu ? "_cpu" : "_oracle");
                         });

// The built-in model on the compiled CPU path; on the oracle only its logits (its cached
// tests there take seconds per run and check nothing the tiny families do not).
INSTANTIATE_TEST_SUITE_P(BuiltinModel, HfFixture, ::testing::Combine(::testing::Values("kjv"),
                                                                     ::testing::Values(llm::ExecutorKind::kCpu)),
                         [](const auto& info) { return str_cat(std::get<0>(info.param), "_cpu"); });

TEST(BuiltinModelOracle, AllPositionLogitsMatchPyTorch) {
  testing::expect_logits_match("kjv", {.executor = llm::ExecutorKind::kOracle}, 1e-4);
}

// Routing rules kvforge does not trace yet are refused naming the setting, never run as
// another rule.
TEST(HfFixtureRefusal, UnknownExpertRoutingIsRefused) {
  const std::string dir = testing::temp_dir("moe_routing");
  std::filesystem::copy(testing::fixture_dir("deepseek_v2_moe"), dir, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  nlohmann::json cfg;
  std::ifstream(dir + "/config.json") >> cfg;
  cfg["topk_method"] = "group_limited_greedy";
  std::ofstream(dir + "/config.json") << cfg.dump();
  Result<models::Model> m = models::open_model(dir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(m.error().message().find("group_limited_greedy"), std::string::npos) << m.error().message();
}

// Phi-3's fused projections must hold exactly the parts the config sizes.
TEST(HfFixtureRefusal, FusedProjectionsOfTheWrongSizeAreRefused) {
  const HostTensor qkv = testing::must(HostTensor::zeros(DType::kF32, {130, 64}));
  auto wrong = models::split_fused("blk.0.attn_qkv.weight", qkv, models::Fix::kSplitQkv, 64, 32);
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(testing::mentions(wrong.error(), "fused q/k/v of 130 rows, expected 128"));
  const HostTensor odd = testing::must(HostTensor::zeros(DType::kF32, {191, 64}));
  EXPECT_FALSE(models::split_fused("blk.0.ffn_gate_up.weight", odd, models::Fix::kSplitGateUp, 0, 0).ok());
  auto parts = models::split_fused("blk.3.ffn_gate_up.weight", testing::must(HostTensor::zeros(DType::kF32, {192, 64})),
                                   models::Fix::kSplitGateUp, 0, 0);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].first, "blk.3.ffn_gate.weight");
  EXPECT_EQ((*parts)[1].second.shape(), (Shape{96, 64}));
}

// DeepSeek-V3's groups must split the experts evenly, at least two to a group (a group's
// score is its two best).
TEST(HfFixtureRefusal, ExpertGroupsThatDoNotSplitTheExpertsAreRefused) {
  const std::string dir = testing::temp_dir("moe_groups");
  std::filesystem::copy(testing::fixture_dir("deepseek_v3"), dir, std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  for (auto [groups, used] : {std::pair{3, 1}, std::pair{4, 1}, std::pair{2, 3}}) {
    nlohmann::json cfg;
    std::ifstream(dir + "/config.json") >> cfg;
    cfg["n_group"] = groups;
    cfg["topk_group"] = used;
    std::ofstream(dir + "/config.json") << cfg.dump();
    Result<models::Model> m = models::open_model(dir);
    ASSERT_FALSE(m.ok()) << groups << " groups, " << used << " used";
    EXPECT_EQ(m.error().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(m.error().message().find("expert groups"), std::string::npos) << m.error().message();
  }
}

}  // namespace
}  // namespace kvf
