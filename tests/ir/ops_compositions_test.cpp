// Norms and activations against their textbook formulas in f64 on random inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;

struct Fixture {
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};
};

// Runs f on x (and optional extras) in both precisions and checks against want.
void check(const std::function<V(Builder&)>& f, const std::vector<double>& want) {
  Result<Buffer> exact = testing::eval_expr(f, eval::Precision::kF64);
  ASSERT_TRUE(exact.ok()) << exact.error().to_string();
  EXPECT_LE(testing::rel_error(exact->data, want), 1e-12);
  Result<Buffer> f32 = testing::eval_expr(f, eval::Precision::kNative);
  ASSERT_TRUE(f32.ok()) << f32.error().to_string();
  EXPECT_LE(testing::rel_error(f32->data, want), 1e-6);
}

TEST(Norms, RmsNormMatchesFormula) {
  Fixture fx;
  SCOPED_TRACE(str_cat("seed ", fx.seed));
  const int64_t rows = 3, dim = 16;
  const Buffer x = testing::random_buffer(fx.rng, {rows, dim}, -3, 3);
  const Buffer w = testing::random_buffer(fx.rng, {dim}, 0.5, 1.5);
  for (bool unit_offset : {false, true}) {
    std::vector<double> want(x.data.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += x.data[r * dim + i] * x.data[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i) {
        want[r * dim + i] = x.data[r * dim + i] * inv * (unit_offset ? 1.0 + w.data[i] : w.data[i]);
      }
    }
    check([&](Builder& b) { return ops::rmsnorm(testing::input(b, "x", x), testing::input(b, "w", w), 1e-5, unit_offset); },
          want);
  }
}

TEST(Norms, LayerNormMatchesFormula) {
  Fixture fx;
  SCOPED_TRACE(str_cat("seed ", fx.seed));
  const int64_t rows = 4, dim = 12;
  const Buffer x = testing::random_buffer(fx.rng, {rows, dim}, -2, 4);
  const Buffer w = testing::random_buffer(fx.rng, {dim});
  const Buffer bias = testing::random_buffer(fx.rng, {dim});
  std::vector<double> want(x.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x.data[r * dim + i] / dim;
    for (int64_t i = 0; i < dim; ++i) var += (x.data[r * dim + i] - mean) * (x.data[r * dim + i] - mean) / dim;
    for (int64_t i = 0; i < dim; ++i) {
      want[r * dim + i] = (x.data[r * dim + i] - mean) / std::sqrt(var + 1e-5) * w.data[i] + bias.data[i];
    }
  }
  check([&](Builder& b) {
    return ops::layernorm(testing::input(b, "x", x), testing::input(b, "w", w), testing::input(b, "b", bias), 1e-5);
  }, want);
}

TEST(Activations, GeluSiluSoftcapAndGatedUnitsMatchFormulas) {
  Fixture fx;
  SCOPED_TRACE(str_cat("seed ", fx.seed));
  const Buffer x = testing::random_buffer(fx.rng, {64}, -6, 6);
  const Buffer u = testing::random_buffer(fx.rng, {64}, -2, 2);
  auto map = [&](auto fn) {
    std::vector<double> out;
    for (size_t i = 0; i < x.data.size(); ++i) out.push_back(fn(x.data[i], u.data[i]));
    return out;
  };
  const double c = std::sqrt(2.0 / M_PI);
  auto gelu_erf = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  auto gelu_tanh = [c](double v) { return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))); };
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  auto in = [&](Builder& b) { return testing::input(b, "x", x); };
  auto up = [&](Builder& b) { return testing::input(b, "u", u); };
  check([&](Builder& b) { return ops::gelu_erf(in(b)); }, map([&](double v, double) { return gelu_erf(v); }));
  check([&](Builder& b) { return ops::gelu_tanh(in(b)); }, map([&](double v, double) { return gelu_tanh(v); }));
  check([&](Builder& b) { return ops::silu(in(b)); }, map([&](double v, double) { return silu(v); }));
  check([&](Builder& b) { return ops::softcap(in(b), 2.5); },
        map([](double v, double) { return 2.5 * std::tanh(v / 2.5); }));
  check([&](Builder& b) { return ops::swiglu(in(b), up(b)); }, map([&](double v, double w) { return silu(v) * w; }));
  check([&](Builder& b) { return ops::geglu(in(b), up(b), true); },
        map([&](double v, double w) { return gelu_tanh(v) * w; }));
  check([&](Builder& b) { return ops::geglu(in(b), up(b), false); },
        map([&](double v, double w) { return gelu_erf(v) * w; }));
}

TEST(Activations, GeluFormsDifferMeasurably) {
  // The two gelu forms are different functions: a test that confused them must fail.
  Result<Buffer> x = Buffer::of(DType::kF32, {1}, {1.5});
  ASSERT_TRUE(x.ok());
  Result<Buffer> a = testing::eval_expr([&](Builder& b) { return ops::gelu_erf(testing::input(b, "x", *x)); });
  Result<Buffer> t = testing::eval_expr([&](Builder& b) { return ops::gelu_tanh(testing::input(b, "x", *x)); });
  ASSERT_TRUE(a.ok() && t.ok());
  EXPECT_GT(std::fabs(a->data[0] - t->data[0]), 1e-5);
}

TEST(Projections, LinearIsXTimesWTransposedPlusBias) {
  Fixture fx;
  SCOPED_TRACE(str_cat("seed ", fx.seed));
  const Buffer x = testing::random_buffer(fx.rng, {2, 3, 5});
  const Buffer w = testing::random_buffer(fx.rng, {4, 5});
  const Buffer bias = testing::random_buffer(fx.rng, {4});
  std::vector<double> want;
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t o = 0; o < 4; ++o) {
      double acc = bias.data[o];
      for (int64_t i = 0; i < 5; ++i) acc += x.data[r * 5 + i] * w.data[o * 5 + i];
      want.push_back(acc);
    }
  check([&](Builder& b) {
    return ops::linear(testing::input(b, "x", x), testing::input(b, "w", w), testing::input(b, "b", bias));
  }, want);
}

TEST(Masks, AlibiSlopesFollowThePaper) {
  // 8 heads: 2^-1 .. 2^-8. 6 heads: the 4-head series 2^-2,2^-4,2^-6,2^-8 then 2^-1, 2^-3.
  const std::vector<float> s8 = ops::alibi_slopes(8);
  ASSERT_EQ(s8.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(s8[i], std::ldexp(1.0f, -(i + 1)));
  const std::vector<float> s6 = ops::alibi_slopes(6);
  const std::vector<float> want6{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  ASSERT_EQ(s6.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(s6[i], want6[i]);
}

TEST(Masks, CausalAndWindowMasksAreZeroOrMinusInf) {
  Result<Buffer> pos = Buffer::i32({2}, {2, 4});
  ASSERT_TRUE(pos.ok());
  Result<Buffer> causal = testing::eval_expr([&](Builder& b) { return ops::causal_mask(testing::input(b, "p", *pos), 6); });
  Result<Buffer> window =
      testing::eval_expr([&](Builder& b) { return ops::sliding_window_mask(testing::input(b, "p", *pos), 6, 2); });
  ASSERT_TRUE(causal.ok() && window.ok());
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(causal->shape, (Shape{1, 1, 2, 6}));
  EXPECT_EQ(causal->data, (std::vector<double>{0, 0, 0, -inf, -inf, -inf, 0, 0, 0, 0, 0, -inf}));
  EXPECT_EQ(window->data, (std::vector<double>{-inf, 0, 0, -inf, -inf, -inf, -inf, -inf, -inf, 0, 0, -inf}));
}

}  // namespace
}  // namespace kvf
