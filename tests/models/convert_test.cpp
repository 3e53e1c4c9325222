// kvforge convert: a rotate-half HF llama becomes a GGUF llama (q/k rows permuted into
// adjacent pairs); reopened, it gives the same logits as the safetensors original.
#include <gtest/gtest.h>

#include <filesystem>

#include "llm/generator.h"
#include "models/export_gguf.h"
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

}  // namespace
}  // namespace kvf
