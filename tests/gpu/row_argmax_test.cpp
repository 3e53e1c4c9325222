// The greedy token on the GPU: the row_argmax kernel against exec::row_argmax on the rows the
// sampler's own tests pin down (ties to the first, NaN never winning except at 0, every value
// -inf or NaN) and on random 32000-wide rows with planted ties; and a compiled step's
// run_argmax against the argmax of the logits its run() brings back.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda/gpu_testing.h"
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/kernels.h"
#include "exec/row_argmax.h"
#include "gpu/linear_testing.h"
#include "llm/step_runner.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using testing::Dev;

TEST(GpuRowArgmax, MatchesTheHostScan) {
  KVF_NEED_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t d = 32000;
  std::vector<std::vector<float>> rows = {{1, 3, 3, 2}, {nan, 5}, {1, nan, 5}, {-0.0f, 0.0f}, {-inf, -inf, -inf},
                                          {nan, nan}, {-inf, nan, -2}, {nan, 5, 1, 2}, {2, nan, 7, 7}};
  std::mt19937_64 rng(testing::test_seed());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int r = 0; r < 9; ++r) {
    const auto n = static_cast<size_t>(d + r % 4);  // 32000..32003: rows read 16 bytes a load, and rows read a float at a time
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    const float top = 20.0f + static_cast<float>(r);
    v[rng() % n] = top;  // a tie, placed anywhere, whose first copy must win
    v[rng() % n] = top;
    if (r % 3 == 0) v[rng() % n] = nan;
    rows.push_back(std::move(v));
  }
  std::unique_ptr<Device> device = testing::must(Device::open());
  for (const std::vector<float>& row : rows) {
    const auto n = static_cast<int64_t>(row.size());
    Dev x(*device, row.data(), n * 4), out(*device, nullptr, 4);
    exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
    exec::cuda::step::row_argmax(static_cast<const float*>(x.p), 1, n, static_cast<int32_t*>(out.p), l);
    int32_t got = -1;
    ASSERT_TRUE(device->copy_to_host(&got, out.p, 4).ok());
    ASSERT_TRUE(device->synchronize("row_argmax").ok());
    EXPECT_EQ(got, exec::row_argmax(row)) << "row of " << n;
  }
}

TEST(GpuRowArgmax, StepRunnerSendsBackTheLogitsArgmax) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::RunnerOptions opts;
  opts.executor = llm::ExecutorKind::kCuda;
  llm::StepRunner runner(m, opts);
  models::StepSpec spec;
  spec.n_tokens = 5;
  spec.capacity = 16;
  const exec::SlotValues slots{{ir::Slot::kToken, {3, 1, 4, 1, 5}}, {ir::Slot::kPos, {0, 1, 2, 3, 4}}};
  const std::span<const float> logits = testing::must(runner.run(spec, slots));
  std::vector<int32_t> want;
  for (size_t r = 0; r < logits.size(); r += static_cast<size_t>(m.config.vocab)) {
    want.push_back(exec::row_argmax(logits.subspan(r, static_cast<size_t>(m.config.vocab))));
  }
  const std::span<const int32_t> got = testing::must(runner.run_argmax(spec, slots));  // the same writes again
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want);
}

}  // namespace
}  // namespace kvf
