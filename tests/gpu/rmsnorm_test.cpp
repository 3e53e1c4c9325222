// RMSNorm on the GPU against a double loop: rows read as float4s held in registers (widths
// that are whole float4s, up to 8192) and rows on the element loop (other widths, wider
// rows, an x that is not 16-byte aligned), into f32 and rounded to f16 or bf16, with the
// weight or 1 + weight.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/gpu_testing.h"
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/kernels.h"
#include "gpu/linear_testing.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using testing::Dev;

TEST(GpuRmsNorm, EveryWidthAgainstADoubleLoop) {
  KVF_NEED_GPU();
  std::unique_ptr<Device> device = testing::must(Device::open());
  std::mt19937_64 rng(testing::test_seed());
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const int64_t d : {4, 64, 1030, 2048, 5632, 8192, 8196}) {
    for (const int64_t rows : {1, 3, 64}) {
      for (const int64_t skew : {0, 1}) {  // 1: x starts one float past a 16-byte boundary
        for (const bool unit_offset : {false, true}) {
          std::vector<float> x(static_cast<size_t>(rows * d + skew)), w(static_cast<size_t>(d));
          for (float& v : x) v = normal(rng);
          for (float& v : w) v = normal(rng);
          std::vector<double> want(static_cast<size_t>(rows * d));
          for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x.data() + skew + r * d;
            double ss = 0;
            for (int64_t c = 0; c < d; ++c) ss += static_cast<double>(xr[c]) * xr[c];
            const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + 1e-5);
            for (int64_t c = 0; c < d; ++c) {
              want[static_cast<size_t>(r * d + c)] = xr[c] * inv * (unit_offset ? 1.0 + w[c] : w[c]);
            }
          }
          Dev dx(*device, x.data(), static_cast<int64_t>(x.size()) * 4), dw(*device, w.data(), d * 4);
          Dev out(*device, nullptr, rows * d * 4), out16(*device, nullptr, rows * d * 2);
          const exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
          const float* xp = static_cast<const float*>(dx.p) + skew;
          exec::cuda::step::rmsnorm(xp, static_cast<const float*>(dw.p), static_cast<float*>(out.p), rows, d, 1e-5,
                                    unit_offset, l);
          std::vector<float> got(want.size());
          ASSERT_TRUE(device->copy_to_host(got.data(), out.p, rows * d * 4).ok());
          ASSERT_TRUE(device->synchronize("rmsnorm").ok());
          const std::string what = str_cat("d ", d, " rows ", rows, " skew ", skew, " unit ", unit_offset);
          EXPECT_LE(testing::rel_error(std::vector<double>(got.begin(), got.end()), want), 1e-6) << what;
          for (const DType half : {DType::kF16, DType::kBF16}) {
            exec::cuda::step::rmsnorm_to_half(xp, static_cast<const float*>(dw.p), out16.p, half, rows, d, 1e-5,
                                              unit_offset, l);
            std::vector<uint16_t> h(want.size());
            ASSERT_TRUE(device->copy_to_host(h.data(), out16.p, rows * d * 2).ok());
            ASSERT_TRUE(device->synchronize("rmsnorm_to_half").ok());
            std::vector<double> g16(h.size());
            for (size_t i = 0; i < h.size(); ++i) g16[i] = half == DType::kF16 ? testing::f16_to_f32(h[i]) : testing::bf16_to_f32(h[i]);
            // One rounding of each value: 2^-11 relative (f16), 2^-8 (bf16).
            EXPECT_LE(testing::rel_error(g16, want), half == DType::kF16 ? 1e-3 : 8e-3) << what << " " << dtype_name(half);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvf
