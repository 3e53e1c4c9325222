// kvforge convert: a rotate-half HF llama becomes a GGUF llama (q/k rows permuted into
// adjacent pairs); reopened, it gives the same logits as the safetensors original. A
// Qwen3-MoE becomes GGUF qwen3moe with each layer's experts stacked, and reads back the same.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "llm/generator.h"
#include "load/gguf.h"
#include "models/export_gguf.h"
#include "models/gguf_names.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

std::vector<float> logits(const models::Model& m, const std::vector<int32_t>& ids) {
  llm::Generator gen(m, static_cast<int64_t>(ids.size()));
  return testing::must(gen.step(ids));
}

TEST(Convert, HfLlamaToGgufKeepsLogits) {
  const std::string dir = testing::fixture_dir("llama");
  const models::OpenOptions no_tok{.tokenizer_path = "", .check_finite = true, .with_tokenizer = false};
  const models::Model hf = testing::must(models::open_model(dir, no_tok));
  ASSERT_EQ(hf.config.rope_layout, ir::ops::RopeLayout::kHalf);
  const std::string out = (std::filesystem::temp_directory_path() / str_cat("kvf_convert_", ::getpid(), ".gguf")).string();
  ASSERT_TRUE(models::export_gguf(hf, out).ok());
  const models::Model gguf = testing::must(models::open_model(out, no_tok));
  EXPECT_EQ(gguf.config.rope_layout, ir::ops::RopeLayout::kInterleaved);
  const std::vector<int32_t> ids{5, 17, 99, 3, 42, 7, 64, 1};
  const std::vector<float> a = logits(hf, ids), b = logits(gguf, ids);
  EXPECT_LE(testing::rel_error({a.begin(), a.end()}, {b.begin(), b.end()}), 1e-6);
  std::filesystem::remove(out);
}

// The Q4_K_M mix reads a layer number out of `blk.<n>.` names: a tensor whose name has none
// there is written like any other matrix, never a crash.
TEST(Convert, Q4KMixTakesNamesWithoutALayerNumber) {
  const models::OpenOptions no_tok{.tokenizer_path = "", .check_finite = true, .with_tokenizer = false};
  models::Model m = testing::must(models::open_model(testing::fixture_dir("llama"), no_tok));
  m.weights.add("blk.x.attn_v.weight", testing::must(HostTensor::zeros(DType::kF32, {2, 64})));
  const std::string out = (std::filesystem::temp_directory_path() / str_cat("kvf_convert_mix_", ::getpid(), ".gguf")).string();
  const Status s = models::export_gguf(m, out, {.outtype = DType::kQ4_K, .q4_k_m = true, .progress = {}});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  std::filesystem::remove(out);
}

TEST(Convert, Qwen3MoeRoundTripsThroughStackedExperts) {
  const models::OpenOptions no_tok{.tokenizer_path = "", .check_finite = true, .with_tokenizer = false};
  const models::Model ours = testing::must(models::open_model("synthetic:qwen3moe-tiny", no_tok));
  const std::string out = (std::filesystem::temp_directory_path() / str_cat("kvf_convert_moe_", ::getpid(), ".gguf")).string();
  const Status s = models::export_gguf(ours, out);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const load::GgufFile f = testing::must(load::read_gguf(out));
  EXPECT_EQ(testing::must(f.get_string("general.architecture")), "qwen3moe");
  EXPECT_EQ(testing::must(f.get_int("qwen3moe.expert_count")), 4);
  const load::GgufTensorInfo* up = nullptr;
  for (const load::GgufTensorInfo& t : f.tensors) up = t.name == "blk.1.ffn_up_exps.weight" ? &t : up;
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(testing::must(f.tensor(up->name)).shape(), (Shape{4, 64, 128}));
  const models::Model back = testing::must(models::open_model(out, no_tok));
  EXPECT_EQ(back.config.n_experts, 4);
  EXPECT_EQ(back.config.n_experts_used, 2);
  EXPECT_EQ(back.config.expert_hidden_dim, 64);
  EXPECT_TRUE(back.config.qk_norm);
  // Expert 3's up matrix is the 4th slab of the stack, byte for byte.
  const HostTensor& a = ours.weights.tensors().at("blk.1.ffn_up_exp.3.weight");
  const HostTensor& b = back.weights.tensors().at("blk.1.ffn_up_exp.3.weight");
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
  const std::vector<int32_t> ids{5, 17, 99, 3, 42, 7, 64, 1};
  EXPECT_EQ(logits(ours, ids), logits(back, ids));
  std::filesystem::remove(out);
}

// llama.cpp's qwen3moe routes every layer: a checkpoint with a dense layer is refused.
TEST(Convert, Qwen3MoeWithADenseLayerIsRefused) {
  const models::OpenOptions no_tok{.tokenizer_path = "", .check_finite = true, .with_tokenizer = false};
  const models::Model hf = testing::must(models::open_model(testing::fixture_dir("qwen3_moe"), no_tok));
  const std::string out = (std::filesystem::temp_directory_path() / str_cat("kvf_convert_dense_", ::getpid(), ".gguf")).string();
  const Status s = models::export_gguf(hf, out);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(testing::mentions(s.error(), "layer 0 is dense"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(GgufNames, StackedExpertsMustBeThreeDimensionalAndNumberedFromZero) {
  models::Weights w;
  const Status flat = models::add_gguf_tensor(w, "blk.0.ffn_up_exps.weight", testing::must(HostTensor::zeros(DType::kF32, {4, 8})));
  ASSERT_FALSE(flat.ok());
  EXPECT_TRUE(testing::mentions(flat.error(), "[experts, rows, cols]"));
  models::Weights gap;
  gap.add("blk.0.ffn_up_exp.0.weight", testing::must(HostTensor::zeros(DType::kF32, {4, 8})));
  gap.add("blk.0.ffn_up_exp.2.weight", testing::must(HostTensor::zeros(DType::kF32, {4, 8})));
  const Result<std::vector<models::GgufTensorSource>> sources = models::gguf_sources(gap);
  ASSERT_FALSE(sources.ok());
  EXPECT_TRUE(testing::mentions(sources.error(), "not numbered 0..1"));
}

}  // namespace
}  // namespace kvf
