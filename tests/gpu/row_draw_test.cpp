// Tokens drawn on the GPU (draw_tokens) against the host's draw_row, the definition
// (exec/row_draw.h, tests/exec/row_draw_test.cpp): greedy rows and rows of equal weights
// exactly; sampled rows of 32000 and 151936 logits for a grid of uniforms, equal but where
// an expf's last bit moves a CDF boundary past the uniform (at most 1 in 200 here); the
// edits land in the row. Through the driver: a seed gives the same tokens on every run, and
// a step where one row needs its logits (logprobs) draws the others on the host the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda/gpu_testing.h"
#include "drawn_steps.h"
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/kernels.h"
#include "exec/row_argmax.h"
#include "exec/row_draw.h"
#include "gpu/linear_testing.h"
#include "llm/driver.h"
#include "llm/scheduler.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::LogitEdit;
using exec::RowDraw;
using exec::cuda::step::Device;
using testing::Dev;

// draw_tokens on one row of logits per draw (each row a copy of `row`).
std::vector<int32_t> gpu_draws(Device& device, const std::vector<float>& row, const std::vector<RowDraw>& draws,
                               const std::vector<LogitEdit>& edits, std::vector<float>* edited = nullptr) {
  const auto d = static_cast<int64_t>(row.size()), rows = static_cast<int64_t>(draws.size());
  std::vector<float> x;
  for (int64_t r = 0; r < rows; ++r) x.insert(x.end(), row.begin(), row.end());
  Dev xd(device, x.data(), rows * d * 4), dd(device, draws.data(), rows * static_cast<int64_t>(sizeof(RowDraw))),
      ed(device, edits.empty() ? nullptr : edits.data(), std::max<int64_t>(1, static_cast<int64_t>(edits.size() * sizeof(LogitEdit)))),
      out(device, nullptr, rows * 4);
  const exec::cuda::step::Launch l{device.stream(), device.fault(), 0, device.tensor_cores()};
  exec::cuda::step::draw_tokens(static_cast<float*>(xd.p), rows, d, static_cast<const RowDraw*>(dd.p),
                                static_cast<const LogitEdit*>(ed.p), static_cast<int32_t*>(out.p), l);
  std::vector<int32_t> ids(static_cast<size_t>(rows), -1);
  EXPECT_TRUE(device.copy_to_host(ids.data(), out.p, rows * 4).ok());
  if (edited != nullptr) {
    edited->resize(static_cast<size_t>(d));
    EXPECT_TRUE(device.copy_to_host(edited->data(), xd.p, d * 4).ok());
  }
  EXPECT_TRUE(device.synchronize("draw_tokens").ok());
  return ids;
}

std::vector<int32_t> host_draws(const std::vector<float>& row, const std::vector<RowDraw>& draws,
                                const std::vector<LogitEdit>& edits) {
  std::vector<int32_t> ids;
  for (const RowDraw& d : draws) {
    ids.push_back(exec::draw_row(row, d, std::span(edits).subspan(static_cast<size_t>(d.first_edit), static_cast<size_t>(d.edits))));
  }
  return ids;
}

std::vector<RowDraw> on_grid(RowDraw d, int n) {
  std::vector<RowDraw> out;
  for (int g = 0; g < n; ++g) {
    d.uniform = (static_cast<float>(g) + 0.5f) / static_cast<float>(n);
    out.push_back(d);
  }
  return out;
}

TEST(GpuRowDraw, GreedyRowsAreTheEditedRowsArgmax) {
  KVF_NEED_GPU();
  std::unique_ptr<Device> device = testing::must(Device::open());
  std::mt19937_64 rng(testing::test_seed());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(32000);
  for (float& x : row) x = normal(rng);
  std::vector<LogitEdit> edits;
  for (int32_t t = 3; t < 32000; t += 997) {
    edits.push_back({.token = t, .ops = LogitEdit::kAddBias | LogitEdit::kRepeatPenalty | LogitEdit::kSubtract,
                     .bias = 4.0f, .subtract = 0.5f});
  }
  edits.push_back({.token = 40000, .ops = LogitEdit::kAddBias, .bias = 1e9f});  // outside the row: ignored
  const std::vector<RowDraw> draws{{.repeat_penalty = 1.3, .edits = static_cast<int32_t>(edits.size())}, RowDraw{}};
  std::vector<float> edited;
  EXPECT_EQ(gpu_draws(*device, row, draws, edits, &edited), host_draws(row, draws, edits));
  for (const LogitEdit& e : edits) {
    if (e.token < 32000) {
      EXPECT_EQ(edited[static_cast<size_t>(e.token)], exec::edited_logit(row[static_cast<size_t>(e.token)], e, 1.3));
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& r : {std::vector<float>{nan, 5, 1}, std::vector<float>{1, nan, 5, 5}}) {
    EXPECT_EQ(gpu_draws(*device, r, {RowDraw{}}, {})[0], exec::row_argmax(r));
  }
}

// Equal weights are exact on both sides (every expf is of 0): ties cut to the lower ids.
TEST(GpuRowDraw, TiesAndSpecialValuesDrawAsTheHostDoes) {
  KVF_NEED_GPU();
  std::unique_ptr<Device> device = testing::must(Device::open());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<std::vector<float>, RowDraw>> cases{
      {{1, 3, 3, 3, 2}, {.temperature = 1.0f, .top_k = 2}},
      {std::vector<float>(8, 0.5f), {.temperature = 1.0f, .top_p = 0.3f}},
      {std::vector<float>(3000, -1.0f), {.temperature = 0.5f, .top_k = 1000}},
      {{nan, -inf, 0.5f, nan, 0.5f, -inf, 0.5f}, {.temperature = 5.0f}},
      {{-inf, -inf, nan}, {.temperature = 1.0f}},
      {{1.0f, inf, inf}, {.temperature = 1.0f}}};
  for (const auto& [row, d] : cases) {
    const std::vector<RowDraw> draws = on_grid(d, 64);
    EXPECT_EQ(gpu_draws(*device, row, draws, {}), host_draws(row, draws, {})) << "row of " << row.size();
  }
}

TEST(GpuRowDraw, SampledRowsMatchTheHostDraw) {
  KVF_NEED_GPU();
  std::unique_ptr<Device> device = testing::must(Device::open());
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<RowDraw> settings{{.temperature = 1.0f},
                                      {.temperature = 0.7f, .top_k = 40},
                                      {.temperature = 1.0f, .top_k = 5000},
                                      {.temperature = 1.3f, .top_p = 0.9f},  // flat: the cut past 1024 candidates
                                      {.temperature = 0.4f, .top_p = 0.95f},  // peaked: within the best 1024
                                      {.temperature = 0.9f, .min_p = 0.05f},
                                      {.temperature = 0.8f, .top_k = 50, .top_p = 0.8f, .min_p = 0.02f}};
  int cases = 0, differ = 0;
  for (const int64_t vocab : {int64_t{32000}, int64_t{151936}}) {
    for (const RowDraw& d : settings) {
      std::normal_distribution<float> normal(0.0f, 2.0f + static_cast<float>(rng() % 3));
      std::vector<float> row(static_cast<size_t>(vocab));
      for (float& x : row) x = normal(rng);
      const std::vector<RowDraw> draws = on_grid(d, 256);
      const std::vector<int32_t> got = gpu_draws(*device, row, draws, {}), want = host_draws(row, draws, {});
      for (size_t i = 0; i < got.size(); ++i) {
        ++cases;
        differ += got[i] != want[i];
        ASSERT_TRUE(got[i] >= 0 && got[i] < vocab) << got[i];
      }
    }
  }
  std::printf("GPU draws: %d of %d differ from the host's\n", differ, cases);
  EXPECT_LE(differ * 200, cases);
}

// Sampling requests through the driver on the GPU: the same tokens on every run, and each
// what it draws alone on a contiguous GPU cache (testing::solo draws as the device does).
TEST(GpuDriver, SampledRequestsAreSeededAndEqualEachRequestAlone) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 4; ++i) {
    reqs.push_back({str_cat("s", i), testing::random_ids(rng, 6 + 3 * i, m.config.vocab), 16,
                    {.temperature = 0.9, .top_k = 20 * i, .top_p = i == 2 ? 0.9 : 1.0, .repeat_penalty = i == 3 ? 1.2 : 1.0,
                     .seed = static_cast<uint64_t>(5 + i)}});
  }
  const auto run = [&] {
    llm::DriverOptions o = testing::test_driver(16, 64, "gpu_row_draw_test");
    o.executor = llm::ExecutorKind::kCuda;
    llm::Driver driver(m, o);
    llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 8});
    return testing::run_scheduled(sched, reqs);
  };
  const std::map<std::string, llm::Completion> a = run(), b = run();
  for (const llm::Request& r : reqs) {
    EXPECT_EQ(a.at(r.id).ids, b.at(r.id).ids) << r.id;
    EXPECT_EQ(a.at(r.id).ids, testing::solo(m, r, 64, llm::ExecutorKind::kCuda)) << r.id;
  }
}

// `generate --device cuda`: a generator's drawn step draws on the GPU what draw_row draws from
// the logits of the same step on a twin generator (the same weights, the same kernels).
TEST(GpuGenerator, DrawnStepsAreTheHostDrawOfTheSameLogits) {
  KVF_NEED_GPU();
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  ASSERT_TRUE(llm::Generator(m, 64, {.executor = llm::ExecutorKind::kCuda}).samples_on_device());
  testing::expect_drawn_steps_match(m, {.executor = llm::ExecutorKind::kCuda}, 16);
}

}  // namespace
}  // namespace kvf
