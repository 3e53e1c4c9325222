// Rotary embeddings against complex rotation: (a + ib) · e^{i·pos·ω}, both pairings,
// full and partial rotary; and the inverse frequencies against theta^(-2i/rot).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;

struct RopeCase {
  const char* name;
  ops::RopeLayout layout;
  int64_t head_dim, rotary_dim;
};

class Rope : public ::testing::TestWithParam<RopeCase> {};

TEST_P(Rope, EqualsComplexRotation) {
  const RopeCase& c = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t batch = 2, heads = 3, t = 4;
  const Buffer x = testing::random_buffer(rng, {batch, heads, t, c.head_dim});
  const std::vector<int32_t> pos{0, 5, 17, 300};
  const ops::RopeSpec spec{.head_dim = c.head_dim, .rotary_dim = c.rotary_dim, .theta = 10000.0, .layout = c.layout,
                           .inv_freq = {}};
  const std::vector<float> inv = ops::rope_inv_freq(spec);
  const int64_t rot = c.rotary_dim ? c.rotary_dim : c.head_dim, half = rot / 2;
  ASSERT_EQ(static_cast<int64_t>(inv.size()), half);

  // f64 mode keeps pos * inv_freq exact; native mode rounds the angle to f32, as HF does.
  auto rotate = [&](bool f32_angle) {
    std::vector<double> want = x.data;
    for (int64_t row = 0; row < batch * heads * t; ++row) {
      const double p = pos[row % t];
      const double* in = x.data.data() + row * c.head_dim;
      double* out = want.data() + row * c.head_dim;
      for (int64_t i = 0; i < half; ++i) {
        double angle = p * static_cast<double>(inv[i]);
        if (f32_angle) angle = static_cast<float>(angle);
        const int64_t a = c.layout == ops::RopeLayout::kHalf ? i : 2 * i;
        const int64_t b = c.layout == ops::RopeLayout::kHalf ? i + half : 2 * i + 1;
        const std::complex<double> z = std::complex<double>(in[a], in[b]) * std::polar(1.0, angle);
        out[a] = z.real();
        out[b] = z.imag();
      }
    }
    return want;
  };
  Result<Buffer> pos_buf = Buffer::i32({t}, pos);
  ASSERT_TRUE(pos_buf.ok());
  auto expr = [&](Builder& b) {
    ops::RopeTables tables = ops::rope_tables(testing::input(b, "pos", *pos_buf), spec);
    return ops::apply_rope(testing::input(b, "x", x), tables);
  };
  Result<Buffer> exact = testing::eval_expr(expr, eval::Precision::kF64);
  ASSERT_TRUE(exact.ok()) << exact.error().to_string();
  EXPECT_LE(testing::rel_error(exact->data, rotate(false)), 1e-12);
  Result<Buffer> f32 = testing::eval_expr(expr, eval::Precision::kNative);
  ASSERT_TRUE(f32.ok()) << f32.error().to_string();
  EXPECT_LE(testing::rel_error(f32->data, rotate(true)), 1e-6);
  // The unrotated tail of a partial rotary head passes through bit for bit.
  for (int64_t row = 0; row < batch * heads * t; ++row)
    for (int64_t d = rot; d < c.head_dim; ++d) EXPECT_EQ(f32->data[row * c.head_dim + d], x.data[row * c.head_dim + d]);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Rope,
                         ::testing::Values(RopeCase{"half", ops::RopeLayout::kHalf, 16, 0},
                                           RopeCase{"interleaved", ops::RopeLayout::kInterleaved, 16, 0},
                                           RopeCase{"half_partial", ops::RopeLayout::kHalf, 16, 8},
                                           RopeCase{"interleaved_partial", ops::RopeLayout::kInterleaved, 12, 4}),
                         [](const ::testing::TestParamInfo<RopeCase>& info) { return std::string(info.param.name); });

TEST(RopeFreq, InverseFrequenciesAreThetaPowers) {
  const ops::RopeSpec spec{.head_dim = 64, .rotary_dim = 0, .theta = 500000.0, .layout = ops::RopeLayout::kHalf,
                           .inv_freq = {}};
  const std::vector<float> inv = ops::rope_inv_freq(spec);
  ASSERT_EQ(inv.size(), 32u);
  for (size_t i = 0; i < inv.size(); ++i) {
    const double want = std::pow(500000.0, -2.0 * static_cast<double>(i) / 64.0);
    EXPECT_NEAR(inv[i], want, want * 1e-6) << "i=" << i;
  }
}

TEST(RopeFreq, OddRotaryDimIsATypedError) {
  Builder b("bad_rope");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {2});
  ops::rope_tables(pos, {.head_dim = 8, .rotary_dim = 5, .theta = 1e4, .layout = ops::RopeLayout::kHalf, .inv_freq = {}});
  Result<ir::Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
}

}  // namespace
}  // namespace kvf
