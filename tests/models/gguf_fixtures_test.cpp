// The transformers fixtures through GGUF: each family's checkpoint written by export_gguf
// (what `kvforge convert` runs) in f32, read back through the family's GGUF codec, gives
// transformers' all-position logits within 1e-4 and its greedy ids; and a model GGUF cannot
// express is refused before a byte is written.
#include <gtest/gtest.h>

#include <filesystem>

#include "hf_fixture.h"
#include "models/export_gguf.h"
#include "models/gguf_codec.h"
#include "models/model.h"
#include "models/registry.h"
#include "testing.h"

namespace kvf {
namespace {

namespace fs = std::filesystem;

// The fixture's checkpoint written as f32 GGUF and opened again.
Result<models::Model> through_gguf(const testing::Fixture& f, const std::string& family) {
  const models::Model hf = testing::open_fixture(f);
  const std::string path = (fs::temp_directory_path() / str_cat("kvf_gguf_fixture_", family, "_", testing::test_seed(), ".gguf")).string();
  Status written = models::export_gguf(hf, path, {.outtype = DType::kF32});
  if (!written) return written.take_error();
  Result<models::Model> m = models::open_model(path, {.check_finite = true, .with_tokenizer = false});
  fs::remove(path);
  // Read back as the family of its GGUF architecture (mixtral as llama), which traces the same.
  if (m) {
    EXPECT_EQ(models::family_by_arch(m->config.arch)->trace, models::family_by_arch(hf.config.arch)->trace);
  }
  return m;
}

class GgufFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufFixture, AllPositionLogitsAndGreedyIdsMatchTransformers) {
  const testing::Fixture f = testing::read_fixture(GetParam());
  Result<models::Model> m = through_gguf(f, GetParam());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  llm::GeneratorOptions cpu;
  cpu.executor = llm::ExecutorKind::kCpu;
  testing::expect_logits_match(f, *m, GetParam(), cpu, 1e-4);
  testing::expect_greedy_ids_match(f, *m, cpu);
}

INSTANTIATE_TEST_SUITE_P(Families, GgufFixture,
                         ::testing::Values("llama", "qwen2", "qwen3", "mixtral", "phi3", "gpt2", "bloom", "gemma2", "gemma3",
                                           "deepseek_v2", "deepseek_v2_moe", "deepseek_v2_qlora", "deepseek_v3",
                                           "qwen3_moe_routed", "qwen2_moe_routed", "deepseek_v32"));

// llama.cpp's converter splits MLA's up-projection per head: attn_k_b [H, r, nope] (W_uk
// transposed) and attn_v_b [H, dv, r]. Reading rejoins them into kvforge's attn_kv_b.
TEST(GgufDeepseek2, SplitLatentProjectionsAreRejoined) {
  const models::Model m = testing::open_fixture(testing::read_fixture("deepseek_v2"));
  const models::ModelConfig& c = m.config;
  const int64_t H = c.n_heads, r = c.kv_lora_rank, nope = c.qk_nope_dim, dv = c.v_head_dim;
  const HostTensor& kv = m.weights.tensors().at("blk.0.attn_kv_b.weight");
  ASSERT_EQ(kv.shape(), (Shape{H * (nope + dv), r}));
  const std::vector<float> x = testing::must(kv.to_f32());
  std::vector<float> kb(static_cast<size_t>(H * r * nope)), vb(static_cast<size_t>(H * dv * r));
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < nope + dv; ++i) {
      for (int64_t j = 0; j < r; ++j) {
        const float v = x[static_cast<size_t>((h * (nope + dv) + i) * r + j)];
        if (i < nope) kb[static_cast<size_t>((h * r + j) * nope + i)] = v;
        else vb[static_cast<size_t>((h * dv + i - nope) * r + j)] = v;
      }
    }
  }
  models::Weights split;
  split.add("blk.0.attn_k_b.weight", testing::must(HostTensor::from_f32({H, r, nope}, kb)));
  split.add("blk.0.attn_v_b.weight", testing::must(HostTensor::from_f32({H, dv, r}, vb)));
  models::ModelConfig cfg = c;
  ASSERT_TRUE(models::kDeepseek2Gguf.to_model(cfg, split).ok());
  ASSERT_TRUE(split.has("blk.0.attn_kv_b.weight"));
  EXPECT_FALSE(split.has("blk.0.attn_k_b.weight"));
  EXPECT_EQ(testing::must(split.tensors().at("blk.0.attn_kv_b.weight").to_f32()), x);

  models::Weights lone;  // a k_b without its v_b, or of the wrong shape, is refused
  lone.add("blk.0.attn_k_b.weight", testing::must(HostTensor::from_f32({H, r, nope}, kb)));
  EXPECT_FALSE(models::kDeepseek2Gguf.to_model(cfg, lone).ok());
  models::Weights misshapen;
  misshapen.add("blk.0.attn_k_b.weight", testing::must(HostTensor::from_f32({H, nope, r}, kb)));
  misshapen.add("blk.0.attn_v_b.weight", testing::must(HostTensor::from_f32({H, dv, r}, vb)));
  EXPECT_FALSE(models::kDeepseek2Gguf.to_model(cfg, misshapen).ok());
}

// A MoE checkpoint without a layer's router traces to a typed error naming it (the routing
// over a failed trace stays poisoned rather than reading a shape it does not have).
TEST(GgufFixtureRefusal, AMissingRouterIsATypedError) {
  models::Model m = testing::open_fixture(testing::read_fixture("qwen3_moe_routed"));
  models::Weights kept(m.weights.source());
  for (const auto& [name, t] : m.weights.tensors()) {
    if (name != "blk.1.ffn_gate_inp.weight") kept.add(name, t);
  }
  m.weights = std::move(kept);
  Result<ir::Graph> g = m.trace_step({.n_tokens = 3, .capacity = 8});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("blk.1.ffn_gate_inp.weight"), std::string::npos) << g.error().to_string();
}

// What llama.cpp's architecture cannot hold is refused, naming it, and nothing is written.
TEST(GgufFixtureRefusal, WhatTheArchitectureCannotHoldIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen2_moe", "layer 0 is dense"},           // llama.cpp's qwen2moe routes every layer
      {"qwen3_moe", "layer 0 is dense"},           // llama.cpp's qwen3moe routes every layer
      {"llama3_scaled", "scaled rope frequencies"},
      {"mistral", "sliding window"},
  };
  for (const auto& [family, why] : cases) {
    SCOPED_TRACE(family);
    const models::Model m = testing::open_fixture(testing::read_fixture(family));
    const std::string path = (fs::temp_directory_path() / str_cat("kvf_gguf_refused_", testing::test_seed(), ".gguf")).string();
    Status s = models::export_gguf(m, path, {.outtype = DType::kF32});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
    EXPECT_NE(s.error().message().find(why), std::string::npos) << s.error().to_string();
    EXPECT_FALSE(fs::exists(path));
  }
}

}  // namespace
}  // namespace kvf
