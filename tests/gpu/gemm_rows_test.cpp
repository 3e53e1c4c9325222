// The batched-decode linears' tensor-core kernels (exec/cuda/step/gemm_rows.cu and, past its
// rows on Hopper, gemm_stream_sm90a.cu) where gemv_test's epilogue sweep does not reach: a
// group wide enough that no tile splits its k (the schedule says so on this device), bf16
// weights, the split tiles' sums the same bits on every launch (the tile counters go back to
// zero), each x-row tile width and both tile heights of the streaming kernel, and the shapes
// each declines.
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

enum class Kernel { kRows, kStream };

// One part of n rows over m rows of x [m, k]: the kernel's output `launches` times over (the
// last kept; each must equal the first) and the double reference over x rounded to dt.
Run run(DType dt, int64_t m, int64_t n, int64_t k, int launches, Kernel kernel = Kernel::kRows) {
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
  const bool rows = kernel == Kernel::kRows;
  const exec::cuda::step::GemmRowsScratch need =
      rows ? exec::cuda::step::gemm_rows_scratch(m, k, dt, g) : exec::cuda::step::gemm_stream_scratch(m, k, dt, g);
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
    const auto* xp = static_cast<const float*>(xd.p);
    EXPECT_TRUE(rows ? exec::cuda::step::linear_group_rows(xp, m, k, dt, g, l)
                     : exec::cuda::step::linear_group_stream(xp, m, k, dt, g, l));
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

// The streaming kernel's split count where clusters pack without loss at two blocks an SM
// (64-row x tiles; more with narrower ones).
int stream_splits(int64_t tiles, int64_t k) {
  return plan::gemm_stream_schedule(tiles, k, plan::uniform_residency(exec::cuda::detail::sm_count(), 2)).splits;
}

TEST(GemmStream, RunsOnHopperOnly) {
  KVF_NEED_GPU();
  LinearGroup g;
  g.part[0].n = 256;
  g.part[0].w = reinterpret_cast<const void*>(uintptr_t{256});  // only its alignment is read
  EXPECT_EQ(exec::cuda::step::gemm_stream_fits(64, 2048, DType::kF16, g), exec::cuda::detail::is_sm90());
}

TEST(GemmStream, EveryXTileWidthMatchesTheReference) {
  KVF_NEED_GPU();
  ASSERT_TRUE(exec::cuda::detail::is_sm90()) << "the streaming kernel is Hopper's (wgmma, TMA)";
  // 9, 17 and 64 rows: x tiles of 16, 32 and 64 rows; n = 200 leaves a part-filled tile; k =
  // 1000 is 15 whole chunks and a part of one (TMA fills past k with zeros).
  for (const int64_t m : {9, 17, 64}) {
    SCOPED_TRACE(str_cat("m ", m));
    EXPECT_LE(rel(run(DType::kF16, m, 200, 1000, 1, Kernel::kStream)), 1e-5);
  }
}

TEST(GemmStream, WideGroupRunsUnsplit) {
  KVF_NEED_GPU();
  ASSERT_TRUE(exec::cuda::detail::is_sm90());
  const int64_t m = 33, n = 40000, k = 256;
  ASSERT_EQ(stream_splits((n + 127) / 128, k), 1);
  EXPECT_LE(rel(run(DType::kBF16, m, n, k, 1, Kernel::kStream)), 1e-5);
}

TEST(GemmStream, SplitTilesGiveTheSameBitsEveryLaunch) {
  KVF_NEED_GPU();
  ASSERT_TRUE(exec::cuda::detail::is_sm90());
  const int64_t m = 64, n = 300, k = 4096;
  ASSERT_GT(stream_splits((n + 127) / 128, k), 1);
  EXPECT_LE(rel(run(DType::kF16, m, n, k, 3, Kernel::kStream)), 1e-5);
}

TEST(GemmStream, TilesOfBothHeightsMatchTheReference) {
  KVF_NEED_GPU();
  ASSERT_TRUE(exec::cuda::detail::is_sm90());
  const plan::ClusterResidency two_halves = plan::uniform_residency(exec::cuda::detail::sm_count(), 2);
  // 200 rows: 2 tiles of 128 rows cannot fill the device, so 64-row tiles (one half).
  ASSERT_EQ(plan::gemm_stream_halves(2, two_halves), 1);
  EXPECT_LE(rel(run(DType::kF16, 64, 200, 1024, 2, Kernel::kStream)), 1e-5);
  // 4,300 rows: 34 tiles of 128 rows split 8 ways would fill it, so two halves, each tile split.
  ASSERT_EQ(plan::gemm_stream_halves(34, two_halves), 2);
  ASSERT_GT(stream_splits(34, 1024), 1);
  EXPECT_LE(rel(run(DType::kBF16, 64, 4300, 1024, 2, Kernel::kStream)), 1e-5);
}

TEST(GemmStream, DeclinesWhatItDoesNotRun) {
  LinearGroup g;
  g.part[0].n = 64;
  g.part[0].w = reinterpret_cast<const void*>(uintptr_t{256});
  using exec::cuda::step::gemm_stream_fits;
  EXPECT_FALSE(gemm_stream_fits(plan::kGemmStreamMin - 1, 256, DType::kF16, g));  // gemm_rows' rows
  EXPECT_FALSE(gemm_stream_fits(plan::kGemmStreamMax + 1, 256, DType::kF16, g));  // cuBLASLt
  EXPECT_FALSE(gemm_stream_fits(16, 256, DType::kF32, g));
  EXPECT_FALSE(gemm_stream_fits(16, 256, DType::kQ8_0, g));
  EXPECT_FALSE(gemm_stream_fits(16, 260, DType::kF16, g));  // rows not on 16-byte boundaries
  g.part[0].w = reinterpret_cast<const void*>(uintptr_t{258});
  EXPECT_FALSE(gemm_stream_fits(16, 256, DType::kF16, g));  // weights not on a 16-byte boundary
}

}  // namespace
}  // namespace kvf
