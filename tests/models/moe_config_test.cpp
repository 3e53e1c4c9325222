// Mixture-of-experts settings read from config.json: which layers route, how many experts a
// token takes, and the routing rules kvforge refuses.
#include <gtest/gtest.h>

#include <string>

#include "load/hf_config.h"
#include "models/hf_family_config.h"
#include "testing.h"

namespace kvf::models {
namespace {

const char* kQwen3Moe = R"({"model_type": "qwen3_moe", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
  "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
  "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": true,
  "decoder_sparse_step": 1, "mlp_only_layers": [0, 2]})";

Result<ModelConfig> qwen3_moe(const std::string& text) {
  Result<load::HfConfig> hf = load::parse_hf_config(text, "config.json");
  if (!hf) return hf.take_error();
  ModelConfig c;
  c.arch = "qwen3moe";
  Status s = qwen3_moe_hf_config(*hf, c);
  if (!s) return s.take_error();
  s = c.check();
  if (!s) return s.take_error();
  return c;
}

TEST(MoeConfig, Qwen3MoeRoutesTheLayersNotListedAsDense) {
  const ModelConfig c = testing::must(qwen3_moe(kQwen3Moe));
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 2);
  EXPECT_EQ(c.expert_hidden_dim, 32);
  EXPECT_EQ(c.n_shared_experts, 0);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.expert_layers, (std::vector<bool>{false, true, false, true}));
  for (int64_t l : {1, 3}) EXPECT_TRUE(c.routed(l)) << l;
  for (int64_t l : {0, 2, 4, -1}) EXPECT_FALSE(c.routed(l)) << l;
}

TEST(MoeConfig, SparseStepLeavesTheLayersOffItsGridDense) {
  std::string text = kQwen3Moe;
  text.replace(text.find("\"decoder_sparse_step\": 1"), 24, "\"decoder_sparse_step\": 2");
  text.replace(text.find("[0, 2]"), 6, "[]");
  EXPECT_EQ(testing::must(qwen3_moe(text)).expert_layers, (std::vector<bool>{false, true, false, true}));
}

TEST(MoeConfig, ExpertsPerTokenBeyondTheExpertsIsRefused) {
  std::string text = kQwen3Moe;
  text.replace(text.find("\"num_experts_per_tok\": 2"), 24, "\"num_experts_per_tok\": 9");
  Result<ModelConfig> c = qwen3_moe(text);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(c.error().message().find("experts per token"), std::string::npos) << c.error().message();
}

}  // namespace
}  // namespace kvf::models
