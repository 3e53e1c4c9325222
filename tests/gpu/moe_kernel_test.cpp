// exec/cuda/step's moe() on the schedule plan::choose_moe_schedule picks, against plain
// double loops over the picked experts: the direct form (up to 8 rows) for every stored
// weight type, and the gathered form on row counts past one routing round (256), widths that
// are not multiples of a tile, and pass sizes that split the experts unevenly (the planner's
// scratch bound forced down), in f32 and on the tensor cores (whose reference rounds x and the
// units to the weights' 16-bit type and widens quantized weights to f16, as that path
// promises). Row 0 picks nothing and must come out 0; the last expert is
// picked by no row and holds NaN weights, which must never reach a sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "exec/cuda/step/kernels.h"
#include "gpu/linear_testing.h"
#include "plan/moe_schedule.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using testing::Dev;

struct Case {
  int64_t rows, dim, ffn, experts, k;
  DType gate_dt, down_dt;
  int64_t per_pass;  // the experts a gathered pass may hold (0: the planner's default)
  bool gathered;     // what the planner must choose
  bool half = false; // the device computes from 16-bit inputs where it can (caps.half_compute)
};

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// v as the tensor-core path rounds it for a product over `dt` weights: to bf16 for bf16, else f16.
double rounded(double v, DType dt) {
  return round_to_dtype(dt == DType::kBF16 ? DType::kBF16 : DType::kF16, static_cast<float>(v));
}

// NaN in every element of a stored matrix (for quantized types, in every block's scale).
void poison(DType dt, std::vector<uint8_t>& bytes) {
  if (dt == DType::kF32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < bytes.size(); i += 4) std::memcpy(&bytes[i], &nan, 4);
    return;
  }
  const uint16_t nan16 = dt == DType::kBF16 ? 0x7fc0 : 0x7e00;
  const size_t step = dt == DType::kQ8_0 ? 34 : dt == DType::kQ4_0 ? 18 : 2;
  for (size_t i = 0; i < bytes.size(); i += step) std::memcpy(&bytes[i], &nan16, 2);
}

class GpuMoe : public ::testing::TestWithParam<Case> {};

TEST_P(GpuMoe, MatchesThePickedExpertsInDouble) {
  KVF_NEED_GPU();
  const Case c = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::unique_ptr<Device> device = testing::must(Device::open());

  plan::DeviceCaps caps = device->caps();
  caps.half_compute = c.half;
  if (c.per_pass > 0) caps.max_scratch_bytes = c.per_pass * (c.rows * (c.ffn + c.dim + 2) + 1) * 4;
  const plan::MoeRequest r = plan::choose_moe_schedule(c.rows, c.dim, c.ffn, c.experts, c.gate_dt, c.down_dt, caps);
  ASSERT_EQ(r.gathered, c.gathered);
  if (c.per_pass > 0) {
    ASSERT_EQ(r.experts_per_pass, c.per_pass);
  }
  const bool tc = c.gathered && c.half && c.gate_dt != DType::kF32 && c.down_dt != DType::kF32 && c.dim % 32 == 0 &&
                  c.ffn % 32 == 0;
  ASSERT_EQ(r.tensor_cores, tc);

  std::vector<testing::Weights> mats;  // per expert: gate, up, down
  for (int64_t e = 0; e < c.experts; ++e) {
    mats.push_back(testing::random_weights(c.gate_dt, c.ffn, c.dim, rng));
    mats.push_back(testing::random_weights(c.gate_dt, c.ffn, c.dim, rng));
    mats.push_back(testing::random_weights(c.down_dt, c.dim, c.ffn, rng));
  }
  const int64_t unpicked = c.experts - 1;
  for (int j = 0; j < 3; ++j) poison(j < 2 ? c.gate_dt : c.down_dt, mats[static_cast<size_t>(3 * unpicked + j)].bytes);

  std::vector<float> x(static_cast<size_t>(c.rows * c.dim)), w(static_cast<size_t>(c.rows * c.experts), 0.0f);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  for (int64_t row = 1; row < c.rows; ++row) {  // k of the experts but the last
    for (int64_t i = 0; i < std::min(c.k, c.experts - 1); ++i) {
      w[static_cast<size_t>(row * c.experts + (row * 7 + i) % (c.experts - 1))] = 0.25f + 0.5f * std::fabs(u(rng));
    }
  }

  std::vector<std::unique_ptr<Dev>> owned;
  std::vector<const void*> table(static_cast<size_t>(3 * c.experts));
  for (int64_t e = 0; e < c.experts; ++e) {
    for (int j = 0; j < 3; ++j) {
      const testing::Weights& m = mats[static_cast<size_t>(3 * e + j)];
      owned.push_back(std::make_unique<Dev>(*device, m.bytes.data(), static_cast<int64_t>(m.bytes.size())));
      table[static_cast<size_t>(j * c.experts + e)] = owned.back()->p;
    }
  }
  Dev d_table(*device, table.data(), static_cast<int64_t>(table.size() * sizeof(void*)));
  Dev d_x(*device, x.data(), static_cast<int64_t>(x.size() * 4)), d_w(*device, w.data(), static_cast<int64_t>(w.size() * 4));
  Dev d_out(*device, nullptr, c.rows * c.dim * 4), d_scratch(*device, nullptr, r.scratch_floats * 4);
  const auto* t = static_cast<const void* const*>(d_table.p);
  exec::cuda::step::MoeArgs a;
  a.x = static_cast<const float*>(d_x.p);
  a.weights = static_cast<const float*>(d_w.p);
  a.rows = c.rows, a.dim = c.dim, a.ffn = c.ffn, a.experts = c.experts;
  a.gate = t, a.up = t + c.experts, a.down = t + 2 * c.experts;
  a.gate_dt = c.gate_dt, a.down_dt = c.down_dt;
  a.gathered = r.gathered;
  a.experts_per_pass = r.experts_per_pass;
  a.tensor_cores = r.tensor_cores;
  a.scratch = static_cast<float*>(d_scratch.p);
  a.out = static_cast<float*>(d_out.p);
  exec::cuda::step::moe(a, {device->stream(), device->fault(), 0, {}});
  std::vector<float> out(static_cast<size_t>(c.rows * c.dim));
  ASSERT_TRUE(device->copy_to_host(out.data(), d_out.p, static_cast<int64_t>(out.size() * 4)).ok());
  ASSERT_TRUE(device->synchronize("moe").ok());

  std::vector<double> want(out.size(), 0.0), got(out.begin(), out.end());
  for (int64_t row = 0; row < c.rows; ++row) {
    for (int64_t e = 0; e < c.experts; ++e) {
      const double we = w[static_cast<size_t>(row * c.experts + e)];
      if (we == 0) continue;
      const std::vector<double>&g = tc ? mats[static_cast<size_t>(3 * e)].widened : mats[static_cast<size_t>(3 * e)].exact;
      const std::vector<double>& up = tc ? mats[static_cast<size_t>(3 * e + 1)].widened : mats[static_cast<size_t>(3 * e + 1)].exact;
      const std::vector<double>& dn = tc ? mats[static_cast<size_t>(3 * e + 2)].widened : mats[static_cast<size_t>(3 * e + 2)].exact;
      auto xin = [&](int64_t i) {
        const double v = x[static_cast<size_t>(row * c.dim + i)];
        return tc ? rounded(v, c.gate_dt) : v;
      };
      std::vector<double> h(static_cast<size_t>(c.ffn));
      for (int64_t j = 0; j < c.ffn; ++j) {
        double s = 0, v = 0;
        for (int64_t i = 0; i < c.dim; ++i) {
          s += xin(i) * g[static_cast<size_t>(j * c.dim + i)];
          v += xin(i) * up[static_cast<size_t>(j * c.dim + i)];
        }
        h[static_cast<size_t>(j)] = tc ? rounded(silu(s) * v, c.down_dt) : silu(s) * v;
      }
      for (int64_t i = 0; i < c.dim; ++i) {
        double y = 0;
        for (int64_t j = 0; j < c.ffn; ++j) y += h[static_cast<size_t>(j)] * dn[static_cast<size_t>(i * c.ffn + j)];
        want[static_cast<size_t>(row * c.dim + i)] += we * y;
      }
    }
  }
  for (int64_t i = 0; i < c.dim; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 0.0) << "row 0 picked nothing";
  for (double v : got) ASSERT_TRUE(std::isfinite(v));
  // The tensor cores' reference rounds as the kernel does; an f32 sum that lands on the other
  // side of a 16-bit rounding boundary than the double one moves a unit by one 16-bit ulp.
  EXPECT_LE(testing::rel_error(got, want), tc ? 2e-4 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuMoe,
    ::testing::Values(Case{1, 64, 96, 8, 2, DType::kF32, DType::kF32, 0, false},
                      Case{5, 64, 96, 6, 3, DType::kF16, DType::kF16, 0, false},
                      Case{8, 64, 64, 4, 2, DType::kQ8_0, DType::kQ8_0, 0, false},
                      Case{7, 96, 64, 5, 2, DType::kQ4_0, DType::kQ8_0, 0, false},
                      Case{4, 128, 96, 6, 1, DType::kBF16, DType::kF16, 0, false},
                      Case{3, 36, 40, 4, 2, DType::kF32, DType::kF32, 0, true},
                      Case{9, 70, 50, 6, 2, DType::kF32, DType::kF32, 0, true},
                      Case{130, 64, 96, 8, 2, DType::kF16, DType::kF16, 3, true},
                      Case{300, 96, 160, 4, 3, DType::kBF16, DType::kF32, 0, true},
                      Case{40, 64, 64, 5, 1, DType::kQ8_0, DType::kQ4_0, 2, true},
                      Case{130, 64, 96, 8, 2, DType::kF16, DType::kF16, 3, true, true},
                      Case{300, 96, 160, 4, 3, DType::kBF16, DType::kBF16, 0, true, true},
                      Case{70, 64, 96, 5, 2, DType::kQ8_0, DType::kQ4_0, 0, true, true},
                      Case{9, 72, 40, 4, 2, DType::kBF16, DType::kF32, 0, true, true},
                      Case{20, 40, 48, 4, 2, DType::kF16, DType::kF16, 0, true, true},
                      Case{6, 64, 96, 6, 2, DType::kF16, DType::kF16, 0, false, true}),
    [](const auto& info) {
      const Case& c = info.param;
      return str_cat(c.gathered ? "gathered" : "direct", c.rows, "x", c.dim, "x", c.ffn, "_", c.experts, "top", c.k, "_",
                     dtype_name(c.gate_dt), "_", dtype_name(c.down_dt), c.per_pass > 0 ? str_cat("_pass", c.per_pass) : "",
                     c.half ? "_half" : "");
    });

}  // namespace
}  // namespace kvf
