// exec/cpu moe(): against plain double loops over the picked experts only, on random
// routings (1 to all experts a row, rows that pick nothing), f32 and f16 experts, 1 or 2
// threads. An expert no row picks holds NaN weights: it must never be read into a sum.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "exec/cpu/moe.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf::exec::cpu {
namespace {

struct Case {
  int64_t rows, dim, ffn, experts, k;
  DType dt;
  int threads;
};

double silu(double x) { return x / (1.0 + std::exp(-x)); }

TEST(MoeKernel, MatchesThePickedExpertsInDouble) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const Case cases[] = {{7, 64, 32, 4, 2, DType::kF32, 1}, {9, 64, 96, 8, 1, DType::kF16, 2},
                        {5, 32, 64, 3, 3, DType::kF32, 2}, {1, 64, 32, 6, 2, DType::kF16, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat(c.rows, " rows, ", c.experts, " experts top ", c.k, " ", dtype_name(c.dt)));
    std::vector<HostTensor> mats;
    std::vector<std::vector<float>> wide;  // each matrix decoded
    for (int64_t e = 0; e < c.experts; ++e) {
      for (auto [n, k] : {std::pair{c.ffn, c.dim}, std::pair{c.ffn, c.dim}, std::pair{c.dim, c.ffn}}) {
        mats.push_back(testing::random_weight(c.dt, n, k, rng));
      }
    }
    // The last expert: picked by no row, and NaN throughout.
    const int64_t unpicked = c.experts - 1;
    for (int j = 0; j < 3; ++j) {
      HostTensor& m = mats[static_cast<size_t>(3 * unpicked + j)];
      if (c.dt == DType::kF32) std::fill_n(m.data<float>(), m.numel(), std::numeric_limits<float>::quiet_NaN());
      else std::fill_n(m.data<uint16_t>(), m.numel(), uint16_t{0x7e00});
    }
    for (const HostTensor& m : mats) wide.push_back(testing::must(m.to_f32()));
    std::vector<float> x(static_cast<size_t>(c.rows * c.dim)), w(static_cast<size_t>(c.rows * c.experts), 0.0f);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : x) v = u(rng);
    for (int64_t r = 0; r < c.rows; ++r) {  // row 0 picks nothing; the others k of the experts but the last
      for (int64_t i = 0; r > 0 && i < std::min(c.k, c.experts - 1); ++i) {
        w[static_cast<size_t>(r * c.experts + (r + i) % (c.experts - 1))] = 0.25f + 0.5f * std::fabs(u(rng));
      }
    }
    std::vector<WeightView> gate, up, down;
    for (int64_t e = 0; e < c.experts; ++e) {
      auto view = [&](int j) {
        const HostTensor& m = mats[static_cast<size_t>(3 * e + j)];
        return WeightView{m.dtype(), m.raw(), m.shape()[0], m.shape()[1]};
      };
      gate.push_back(view(0)), up.push_back(view(1)), down.push_back(view(2));
    }
    std::vector<float> out(static_cast<size_t>(c.rows * c.dim), -7.0f);
    std::vector<float> scratch(static_cast<size_t>(plan::moe_scratch_floats(c.rows, c.dim, c.ffn)));
    ThreadPool pool(c.threads);
    moe(pool, {.x = x.data(), .weights = w.data(), .rows = c.rows, .dim = c.dim, .ffn = c.ffn, .gate = gate, .up = up,
               .down = down, .act = ir::GluAct::kSilu, .out = out.data(), .scratch = scratch.data()});
    std::vector<double> want(out.size(), 0.0), got(out.begin(), out.end());
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t e = 0; e < c.experts; ++e) {
        const double we = w[static_cast<size_t>(r * c.experts + e)];
        if (we == 0) continue;
        const std::vector<float>&g = wide[static_cast<size_t>(3 * e)], &uw = wide[static_cast<size_t>(3 * e + 1)];
        const std::vector<float>& d = wide[static_cast<size_t>(3 * e + 2)];
        std::vector<double> h(static_cast<size_t>(c.ffn));
        for (int64_t j = 0; j < c.ffn; ++j) {
          double a = 0, b = 0;
          for (int64_t i = 0; i < c.dim; ++i) {
            a += x[static_cast<size_t>(r * c.dim + i)] * g[static_cast<size_t>(j * c.dim + i)];
            b += x[static_cast<size_t>(r * c.dim + i)] * uw[static_cast<size_t>(j * c.dim + i)];
          }
          h[static_cast<size_t>(j)] = silu(a) * b;
        }
        for (int64_t i = 0; i < c.dim; ++i) {
          double y = 0;
          for (int64_t j = 0; j < c.ffn; ++j) y += h[static_cast<size_t>(j)] * d[static_cast<size_t>(i * c.ffn + j)];
          want[static_cast<size_t>(r * c.dim + i)] += we * y;
        }
      }
    }
    for (int64_t i = 0; i < c.dim; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 0.0) << "row 0 picked nothing";
    for (double v : got) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LE(testing::rel_error(got, want), 1e-5);
  }
}

}  // namespace
}  // namespace kvf::exec::cpu
