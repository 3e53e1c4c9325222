// The batched-decode linears' tensor-core kernel (exec/cuda/step/gemm_rows.cu) where
// gemv_test's epilogue sweep does not reach: a group wide enough that no tile splits its k
// (the schedule says so on this device), bf16 weights, the split tiles' sums the same bits on
// every launch (the tile counters go back to zero), and the shapes it declines.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec/cuda/device_props.h"
#include "exec/cuda/step/kernels.h"
#include "gpu/linear_testing.h"
#include "plan/gemm_rows_schedule.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using exec::cuda::step::LinearGroup;
using testing::Dev;

double rounded(DType dt, float v) {
  return dt == DType::kBF16 ? testing::bf16_to_f32(testing::f32_to_bf16(v)) : testing::f16_to_f32(testing::f32_to_f16(v));
}

struct Run {
  std::vector<float> out;
  std::vector<double> ref;
};

// One part of n rows over m rows of x [m, k]: the kernel's output `launches` times over (the
// last kept; each must equal the first) and the double reference over x rounded to dt.
Run run(DType dt, int64_t m, int64_t n, int64_t k, int launches) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::unique_ptr<Device> device = testing::must(Device::open());
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = normal(rng);
  const testing::Weights w = testing::random_weights(dt, n, k, rng);
  Dev xd(*device, x.data(), m * k * 4), wd(*device, w.bytes.data(), static_cast<int64_t>(w.bytes.size()));
  Dev out(*device, nullptr, m * n * 4);
  LinearGroup g;
  g.part[0] = exec::cuda::step::LinearPart{wd.p, nullptr, n, static_cast<float*>(out.p)};
  const exec::cuda::step::GemmRowsScratch need = exec::cuda::step::gemm_rows_scratch(m, k, dt, g);
  EXPECT_GT(need.bytes, 0);
  Dev scratch(*device, nullptr, need.bytes), counters(*device, nullptr, 4 * need.counters);
  exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
  l.tc.scratch = scratch.p;
  l.tc.scratch_bytes = need.bytes;
  l.tc.counters = static_cast<unsigned*>(counters.p);
  l.tc.counter_count = need.counters;
  Run r;
  std::vector<float> first;
  for (int i = 0; i < launches; ++i) {
    EXPECT_TRUE(exec::cuda::step::linear_group_rows(static_cast<const float*>(xd.p), m, k, dt, g, l));
    EXPECT_TRUE(device->synchronize("gemm_rows").ok());
    r.out.assign(static_cast<size_t>(m * n), 0.0f);
    EXPECT_TRUE(device->copy_to_host(r.out.data(), out.p, m * n * 4).ok());
    if (i == 0) first = r.out;
    EXPECT_EQ(r.out, first) << "launch " << i << " differs from the first";
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < k; ++c) {
        acc += rounded(dt, x[static_cast<size_t>(i * k + c)]) * w.widened[static_cast<size_t>(j * k + c)];
      }
      r.ref.push_back(acc);
    }
  }
  return r;
}

double rel(const Run& r) { return testing::rel_error(std::vector<double>(r.out.begin(), r.out.end()), r.ref); }

TEST(GemmRows, WideGroupRunsUnsplit) {
  KVF_NEED_GPU();
  const int64_t m = 8, n = 17000, k = 256;
  ASSERT_EQ(plan::gemm_rows_schedule(n, k, exec::cuda::detail::sm_count()).splits, 1);
  EXPECT_LE(rel(run(DType::kF16, m, n, k, 1)), 1e-5);
}

TEST(GemmRows, SplitTilesGiveTheSameBitsEveryLaunch) {
  KVF_NEED_GPU();
  const int64_t m = 6, n = 200, k = 2080;  // 65 slices of k: the last stage is partial
  ASSERT_GT(plan::gemm_rows_schedule(n, k, exec::cuda::detail::sm_count()).splits, 1);
  EXPECT_LE(rel(run(DType::kBF16, m, n, k, 3)), 1e-5);
}

TEST(GemmRows, DeclinesWhatItDoesNotRun) {
  LinearGroup g;
  g.part[0].n = 64;
  using exec::cuda::step::gemm_rows_fits;
  EXPECT_TRUE(gemm_rows_fits(plan::kGemmRowsMin, 256, DType::kF16, g));
  EXPECT_TRUE(gemm_rows_fits(plan::kGemmRowsMax, 256, DType::kBF16, g));
  EXPECT_FALSE(gemm_rows_fits(plan::kGemmRowsMin - 1, 256, DType::kF16, g));  // a lone row: the gemv kernels
  EXPECT_FALSE(gemm_rows_fits(plan::kGemmRowsMax + 1, 256, DType::kF16, g));  // cuBLASLt
  EXPECT_FALSE(gemm_rows_fits(8, 256, DType::kF32, g));
  EXPECT_FALSE(gemm_rows_fits(8, 256, DType::kQ8_0, g));
  EXPECT_FALSE(gemm_rows_fits(8, 264, DType::kF16, g));   // k not whole slices of 32
}

}  // namespace
}  // namespace kvf
