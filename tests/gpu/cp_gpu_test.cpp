// Context-parallel ranks on the CUDA executor against the model whole on GPU 0: 2 and 3
// ranks, on GPUs 0.. over NCCL where that many are visible, else sharing the one GPU and
// meeting through pinned host memory. The built-in model (head dim 64, which the split-KV
// decode kernel takes): each rank's decode attention reads only its 16-token blocks of the
// f16 cache; a prefill and 40 greedy decode steps (past several blocks) give the same ids
// and logits within f32 rounding. What the group cannot run is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "cuda/gpu_testing.h"
#include "exec/cuda/step/device.h"
#include "llm/generator.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

constexpr int64_t kCapacity = 128;

llm::GeneratorOptions gpu_f32(DType kv = DType::kF16) {
  llm::GeneratorOptions o;
  o.executor = llm::ExecutorKind::kCuda;
  o.compute = llm::Compute::kF32;
  o.kv_dtype = kv;
  o.threads = 2;
  o.last_logits = true;
  return o;
}

models::Model builtin() { return testing::must(models::open_model(testing::source_dir() + "/models/kjv-7m.gguf")); }

int32_t argmax(const std::vector<float>& l) { return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()); }

TEST(GpuContextParallel, RanksGiveTheWholeModelsIdsAndLogits) {
  KVF_NEED_GPU();
  const models::Model m = builtin();
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(str_cat(ranks, " ranks"));
    llm::Generator whole(m, kCapacity, gpu_f32());
    std::unique_ptr<llm::Generator> split = testing::must(llm::Generator::open(m, kCapacity, gpu_f32(), 1, ranks));
    std::vector<int32_t> in_whole = {1, 7, 42, 99, 5, 300, 17, 64, 3, 11, 250, 8, 19, 77, 120, 6, 2, 90, 31, 444},
                         in_split = in_whole;
    double worst = 0;
    for (int s = 0; s <= 40; ++s) {
      const std::vector<float> want = testing::must(whole.step(in_whole));
      const std::vector<float> got = testing::must(split->step(in_split));
      ASSERT_EQ(got.size(), want.size());
      worst = std::max(worst, testing::max_error_of_largest(got, want));
      ASSERT_EQ(argmax(got), argmax(want)) << "step " << s;
      in_whole = {argmax(want)};
      in_split = {argmax(got)};
    }
    // The merge of the ranks' partials reorders the softmax's sums in f32.
    EXPECT_LE(worst, 2e-5);
    std::printf("cp %d on %d GPU(s), f32: worst logit error %.3g of the largest\n", ranks,
                std::min(ranks, testing::must(exec::cuda::step::Device::count())), worst);
  }
}

// An f32 cache does not run on the decode kernel, whose rows a rank's keys need: its first
// decode step is refused, naming the attention, and the sequence stays where it was.
TEST(GpuContextParallel, AnF32CacheIsRefusedByName) {
  KVF_NEED_GPU();
  const models::Model m = builtin();
  std::unique_ptr<llm::Generator> split =
      testing::must(llm::Generator::open(m, kCapacity, gpu_f32(DType::kF32), 1, 2));
  Result<std::vector<float>> prefill = split->step({1, 7, 42});
  ASSERT_TRUE(prefill.ok()) << prefill.error().to_string();  // a prefill runs whole on every rank
  Result<std::vector<float>> decode = split->step({5});
  ASSERT_FALSE(decode.ok());
  EXPECT_EQ(decode.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(decode.error().message().find("does not run on the split-KV decode kernel"), std::string::npos)
      << decode.error().message();
  EXPECT_EQ(split->position(), 3);
}

}  // namespace
}  // namespace kvf
