// stories260K end to end: greedy decoding from the llama2.c .bin and from llama.cpp's GGUF
// reproduces the reference continuation recorded in shared/models/REFERENCE.md (produced
// by llama.cpp and llama2.c themselves).
#include <gtest/gtest.h>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

// REFERENCE.md: prompt "Once upon a time" with BOS, and llama.cpp's first 64 greedy ids.
const std::vector<int32_t> kPrompt{1, 403, 407, 261, 378};
const std::vector<int32_t> kReference{
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322,
    265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267,
    337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438, 310, 439, 419, 357, 336};

std::vector<int32_t> greedy(const models::Model& m, const std::vector<int32_t>& prompt, size_t n) {
  llm::Generator gen(m, 128);
  Result<std::vector<float>> logits = gen.step(prompt);
  std::vector<int32_t> out;
  while (logits.ok() && out.size() < n) {
    const std::span<const float> last(logits->data() + logits->size() - static_cast<size_t>(gen.vocab()),
                                      static_cast<size_t>(gen.vocab()));
    out.push_back(llm::argmax(last));
    logits = gen.step({out.back()});
  }
  EXPECT_TRUE(logits.ok()) << logits.error().to_string();
  return out;
}

class Stories260K : public ::testing::TestWithParam<const char*> {};

TEST_P(Stories260K, GreedyMatchesReference) {
  std::optional<std::string> path = testing::model_file(GetParam());
  if (!path) KVF_SKIP_MISSING(GetParam() << " not present");
  Result<models::Model> m = models::open_model(*path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false});
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->config.dim, 64);
  EXPECT_EQ(m->config.n_kv_heads, 4);
  EXPECT_EQ(greedy(*m, kPrompt, kReference.size()), kReference);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Stories260K,
                         ::testing::Values("stories260K/stories260K.bin", "stories260K/stories260K.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.index == 0 ? "llama2c_bin" : "gguf");
                         });

TEST(Stories260KPrompt, WithoutBosTheContinuationDiffers) {
  // REFERENCE.md: without BOS llama.cpp continues differently after "She loved to play".
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.bin");
  if (!path) KVF_SKIP_MISSING("stories260K.bin not present");
  Result<models::Model> m = models::open_model(*path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false});
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  const std::vector<int32_t> no_bos(kPrompt.begin() + 1, kPrompt.end());
  EXPECT_NE(greedy(*m, no_bos, kReference.size()), kReference);
}

}  // namespace
}  // namespace kvf
