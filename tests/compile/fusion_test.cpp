// fusion: rmsnorm (plain and Gemma's 1 + w), last-axis softmax, swiglu/geglu and linear
// over every stored weight type (with a bias epilogue) each become one fused eqn whose
// result matches plain double loops and the chain within 1e-5; near-misses keep their eqns.
#include <gtest/gtest.h>

#include <cmath>

#include "compile/passes.h"
#include "ir/printer.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
using testing::count_op;
using testing::find_eqn;
using testing::must;

ir::Graph fuse(const ir::Graph& g) { return must(compile::fusion_pass().run(g)); }

// Runs both graphs (kNative) and checks the fused "out" against the chain and against
// the plain-loop reference; every element must be written (finite).
void expect_close(const ir::Graph& chain, const ir::Graph& fused, const std::vector<double>& ref) {
  const eval::Outputs a = must(testing::run_graph(chain, {}, eval::Precision::kNative));
  const eval::Outputs b = must(testing::run_graph(fused, {}, eval::Precision::kNative));
  const std::vector<double>& got = b.at("out").data;
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(std::isfinite(got[i])) << i;
  EXPECT_LE(testing::rel_error(got, a.at("out").data), 1e-5);
  EXPECT_LE(testing::rel_error(got, ref), 1e-5);
}

class Fusion : public testing::SeededTest {};

// ---- rmsnorm

std::vector<double> rmsnorm_ref(const eval::Buffer& x, const eval::Buffer& w, double eps, bool unit_offset) {
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  std::vector<double> out(x.data.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < d; ++c) ss += x.data[r * d + c] * x.data[r * d + c];
    const double inv = 1 / std::sqrt(ss / d + eps);
    for (int64_t c = 0; c < d; ++c) out[r * d + c] = x.data[r * d + c] * inv * (unit_offset ? 1 + w.data[c] : w.data[c]);
  }
  return out;
}

TEST_F(Fusion, RmsNormPlainAndUnitOffset) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  for (bool unit_offset : {false, true}) {
    const eval::Buffer x = random({2, 5, 16}), w = random({16});
    ir::Builder b("rmsnorm");
    b.output("out", ir::ops::rmsnorm(testing::input(b, "x", x), testing::input(b, "w", w), 1e-5, unit_offset));
    const ir::Graph g = must(b.finish());
    const ir::Graph f = fuse(g);
    ASSERT_EQ(f.eqns.size(), 1u) << ir::print(f);
    const ir::Eqn& e = f.eqns[0];
    EXPECT_EQ(e.op, OpKind::kRmsNorm);
    EXPECT_EQ(e.params.eps, 1e-5);
    EXPECT_EQ(e.params.unit_offset, unit_offset);
    EXPECT_EQ(f.value(e.in[1]).name, "w");
    expect_close(g, f, rmsnorm_ref(x, w, 1e-5, unit_offset));
  }
}

// w + 1 read elsewhere too: the norm fuses with (w + 1) as a plain weight.
TEST_F(Fusion, RmsNormWhoseOffsetWeightIsSharedUsesItAsThePlainWeight) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const eval::Buffer x = random({3, 8}), w = random({8});
  ir::Builder b("shared_offset");
  const V xv = testing::input(b, "x", x), wv = testing::input(b, "w", w);
  const V w1 = wv + 1.0;
  const V ms = b.reduce_sum(xv * xv, {-1}, true) / 8.0;
  b.output("out", xv * b.unary(OpKind::kRsqrt, ms + 1e-6) * w1);
  b.output("w1", w1);
  const ir::Graph g = must(b.finish());
  const ir::Graph f = fuse(g);
  ASSERT_EQ(count_op(f, OpKind::kRmsNorm), 1) << ir::print(f);
  EXPECT_FALSE(find_eqn(f, OpKind::kRmsNorm)->params.unit_offset);
  EXPECT_EQ(f.eqns.size(), 2u);
  expect_close(g, f, rmsnorm_ref(x, w, 1e-6, true));
}

TEST_F(Fusion, RmsNormNearMissesStay) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  struct Miss {
    const char* what;
    int64_t axis;
    double divisor;
    bool leak;
  };
  for (const Miss& m : {Miss{"mean over axis 0", 0, 8, false}, Miss{"divided by D + 1", -1, 9, false},
                        Miss{"mean read elsewhere", -1, 8, true}}) {
    ir::Builder b("rms_miss");
    const V x = testing::input(b, "x", random({8, 8}));
    const V ms = b.reduce_sum(x * x, {m.axis}, true) / m.divisor;
    b.output("out", x * b.unary(OpKind::kRsqrt, ms + 1e-5) * testing::input(b, "w", random({8})));
    if (m.leak) b.output("ms", ms);
    const ir::Graph g = must(b.finish());
    const ir::Graph f = fuse(g);
    EXPECT_EQ(count_op(f, OpKind::kRmsNorm), 0) << m.what;
    EXPECT_EQ(f.eqns.size(), g.eqns.size()) << m.what;
  }
}

// LayerNorm's second half, centered * rsqrt(mean(centered²) + eps) * w, is an RMSNorm of
// the centered input: it fuses as one, the centering and the bias stay.
TEST_F(Fusion, LayerNormScalesLikeAnRmsNormOfTheCenteredInput) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const eval::Buffer x = random({4, 12}), w = random({12}), bias = random({12});
  ir::Builder b("layernorm");
  b.output("out", ir::ops::layernorm(testing::input(b, "x", x), testing::input(b, "w", w), testing::input(b, "bias", bias), 1e-5));
  const ir::Graph g = must(b.finish());
  const ir::Graph f = fuse(g);
  ASSERT_EQ(count_op(f, OpKind::kRmsNorm), 1) << ir::print(f);
  EXPECT_EQ(count_op(f, OpKind::kRsqrt), 0);
  EXPECT_EQ(count_op(f, OpKind::kReduceSum), 1);  // the mean that centers x
  std::vector<double> ref(x.data.size());
  for (size_t r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < 12; ++c) mean += x.data[r * 12 + c] / 12;
    for (size_t c = 0; c < 12; ++c) var += (x.data[r * 12 + c] - mean) * (x.data[r * 12 + c] - mean) / 12;
    for (size_t c = 0; c < 12; ++c) {
      ref[r * 12 + c] = (x.data[r * 12 + c] - mean) / std::sqrt(var + 1e-5) * w.data[c] + bias.data[c];
    }
  }
  expect_close(g, f, ref);
}

// ---- softmax

TEST_F(Fusion, SoftmaxOverTheLastAxis) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const eval::Buffer x = random({3, 4, 7}, -8, 8);
  ir::Builder b("softmax");
  b.output("out", ir::ops::softmax(testing::input(b, "x", x)));
  const ir::Graph g = must(b.finish());
  const ir::Graph f = fuse(g);
  ASSERT_EQ(f.eqns.size(), 1u) << ir::print(f);
  EXPECT_EQ(f.eqns[0].op, OpKind::kSoftmax);
  std::vector<double> ref(x.data.size());
  for (size_t r = 0; r < 12; ++r) {
    double sum = 0;
    for (size_t c = 0; c < 7; ++c) sum += std::exp(x.data[r * 7 + c]);
    for (size_t c = 0; c < 7; ++c) ref[r * 7 + c] = std::exp(x.data[r * 7 + c]) / sum;
  }
  expect_close(g, f, ref);
}

TEST_F(Fusion, SoftmaxNearMissesStay) {
  for (int variant = 0; variant < 3; ++variant) {
    ir::Builder b("softmax_miss");
    const V x = testing::input(b, "x", random({4, 6}));
    const int64_t axis = variant == 0 ? 0 : 1;  // 0: over a non-last axis
    const V m = b.reduce_max(x, {axis}, true);
    const V ex = b.unary(OpKind::kExp, x - m);
    const V other = variant == 1 ? b.unary(OpKind::kExp, x) : ex;  // 1: the sum of another exp
    b.output("out", ex / b.reduce_sum(other, {axis}, true));
    if (variant == 2) b.output("ex", ex);  // 2: exp read elsewhere
    const ir::Graph g = must(b.finish());
    EXPECT_EQ(count_op(fuse(g), OpKind::kSoftmax), 0) << "variant " << variant;
  }
}

// ---- gated units

double silu(double x) { return x / (1 + std::exp(-x)); }
double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

TEST_F(Fusion, SwigluAndGegluBecomeGlu) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  struct Act {
    ir::GluAct act;
    V (*trace)(V, V);
    double (*f)(double);
  };
  const Act acts[] = {
      {ir::GluAct::kSilu, [](V g, V u) { return ir::ops::swiglu(g, u); }, silu},
      {ir::GluAct::kGeluTanh, [](V g, V u) { return ir::ops::geglu(g, u, true); }, gelu_tanh},
      {ir::GluAct::kGeluErf, [](V g, V u) { return ir::ops::geglu(g, u, false); }, gelu_erf},
  };
  for (const Act& a : acts) {
    const eval::Buffer gate = random({2, 3, 10}, -4, 4), up = random({2, 3, 10});
    ir::Builder b("glu");
    b.output("out", a.trace(testing::input(b, "gate", gate), testing::input(b, "up", up)));
    const ir::Graph g = must(b.finish());
    const ir::Graph f = fuse(g);
    ASSERT_EQ(f.eqns.size(), 1u) << ir::print(f);
    EXPECT_EQ(f.eqns[0].op, OpKind::kGlu);
    EXPECT_EQ(f.eqns[0].params.glu, a.act);
    EXPECT_EQ(f.value(f.eqns[0].in[0]).name, "gate");
    std::vector<double> ref(gate.data.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = a.f(gate.data[i]) * up.data[i];
    expect_close(g, f, ref);
  }
}

TEST_F(Fusion, GluNearMissesStay) {
  for (int variant = 0; variant < 3; ++variant) {
    ir::Builder b("glu_miss");
    const V gate = testing::input(b, "gate", random({3, 4}));
    const V up = testing::input(b, "up", random(variant == 0 ? Shape{4} : Shape{3, 4}));  // 0: up broadcasts
    V act = ir::ops::silu(gate);
    if (variant == 1) act = (gate * 0.4) * (1.0 + b.unary(OpKind::kErf, gate * M_SQRT1_2));  // 1: not gelu's 0.5
    if (variant == 2) b.output("act", act);                                                  // 2: read elsewhere
    b.output("out", act * up);
    const ir::Graph g = must(b.finish());
    EXPECT_EQ(count_op(fuse(g), OpKind::kGlu), 0) << "variant " << variant;
  }
}

// ---- linear

// As models::weight(): the constant, cast to f32 unless stored so.
V as_f32(ir::Builder& b, const std::string& name, HostTensor t) {
  const DType dt = t.dtype();
  const V c = b.constant(name, std::move(t));
  return dt == DType::kF32 ? c : b.cast(c, DType::kF32);
}

std::vector<double> linear_ref(const eval::Buffer& x, const HostTensor& w, const std::vector<double>* bias) {
  const std::vector<float> wf = must(w.to_f32());
  const int64_t k = w.shape()[1], n = w.shape()[0], rows = x.numel() / k;
  std::vector<double> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? (*bias)[j] : 0.0;
      for (int64_t c = 0; c < k; ++c) acc += x.data[r * k + c] * wf[j * k + c];
      out[r * n + j] = acc;
    }
  }
  return out;
}

class LinearStored : public ::testing::TestWithParam<DType> {};

TEST_P(LinearStored, BecomesLinearOverTheStoredConstant) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const DType dt = GetParam();
  for (bool with_bias : {false, true}) {
    const eval::Buffer x = testing::random_buffer(rng, {1, 3, 64});
    const HostTensor w = testing::random_weight(dt, 5, 64, rng);
    const eval::Buffer bias = testing::random_buffer(rng, {5});
    ir::Builder b("linear");
    const V bv = with_bias ? testing::input(b, "bias", bias) : V{};
    b.output("out", ir::ops::linear(testing::input(b, "x", x), as_f32(b, "w", w), bv));
    const ir::Graph g = must(b.finish());
    const ir::Graph f = fuse(g);
    ASSERT_EQ(f.eqns.size(), 1u) << ir::print(f);
    const ir::Eqn& e = f.eqns[0];
    ASSERT_EQ(e.op, OpKind::kLinear);
    EXPECT_EQ(e.params.has_bias, with_bias);
    EXPECT_EQ(f.value(e.in[1]).kind, ir::ValueKind::kConstant);
    EXPECT_EQ(f.type(e.in[1]).dtype, dt);
    expect_close(g, f, linear_ref(x, w, with_bias ? &bias.data : nullptr));
  }
}

INSTANTIATE_TEST_SUITE_P(Stored, LinearStored,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

TEST_F(Fusion, LinearBiasStoredInF16KeepsItsCast) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const eval::Buffer x = random({2, 32});
  const HostTensor w = testing::random_weight(DType::kF32, 4, 32, rng_);
  HostTensor bias16 = must(HostTensor::zeros(DType::kF16, {4}));
  std::vector<double> bias(4);
  for (size_t i = 0; i < 4; ++i) {
    bias16.data<uint16_t>()[i] = f32_to_f16_bits(static_cast<float>(i) * 0.25f - 0.4f);
    bias[i] = f16_bits_to_f32(bias16.data<uint16_t>()[i]);
  }
  ir::Builder b("bias16");
  b.output("out", ir::ops::linear(testing::input(b, "x", x), as_f32(b, "w", w), as_f32(b, "bias", bias16)));
  const ir::Graph g = must(b.finish());
  const ir::Graph f = fuse(g);
  ASSERT_EQ(count_op(f, OpKind::kLinear), 1) << ir::print(f);
  EXPECT_TRUE(find_eqn(f, OpKind::kLinear)->params.has_bias);
  EXPECT_EQ(count_op(f, OpKind::kCast), 1);  // the bias as f32
  EXPECT_EQ(f.eqns.size(), 2u);
  expect_close(g, f, linear_ref(x, w, &bias));
}

// One weight read by two linears and, through its cast, by an embedding gather (tied
// embeddings stored in f16): both linears fuse, the cast stays for the gather.
TEST_F(Fusion, SharedWeightViewsFuseEveryLinearAndKeepWhatOthersRead) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const HostTensor w = testing::random_weight(DType::kF16, 6, 32, rng_);
  ir::Builder b("shared");
  const V wf = as_f32(b, "w", w);
  const V wt = b.transpose(wf, {1, 0});
  const V x1 = testing::input(b, "x1", random({2, 32})), x2 = testing::input(b, "x2", random({3, 32}));
  const V emb = b.gather(wf, testing::input(b, "ids", must(eval::Buffer::i32({2}, {1, 4}))));
  b.output("out", b.matmul(x1, wt));
  b.output("out2", b.matmul(x2, wt));
  b.output("emb", emb);
  const ir::Graph g = must(b.finish());
  const ir::Graph f = fuse(g);
  EXPECT_EQ(count_op(f, OpKind::kLinear), 2) << ir::print(f);
  EXPECT_EQ(count_op(f, OpKind::kTranspose), 0);
  EXPECT_EQ(count_op(f, OpKind::kCast), 1);
  const eval::Outputs a = must(testing::run_graph(g, {}, eval::Precision::kNative));
  const eval::Outputs c = must(testing::run_graph(f, {}, eval::Precision::kNative));
  for (const char* name : {"out", "out2", "emb"}) EXPECT_LE(testing::rel_error(c.at(name).data, a.at(name).data), 1e-6) << name;
}

TEST_F(Fusion, LinearNearMisses) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  // W computed in the graph: not a stored weight.
  {
    ir::Builder b("w_intermediate");
    const V w = testing::input(b, "w", random({4, 8})) * 2.0;
    b.output("out", ir::ops::linear(testing::input(b, "x", random({3, 8})), w));
    EXPECT_EQ(count_op(fuse(must(b.finish())), OpKind::kLinear), 0);
  }
  // W used as stored, [K, N], with no transpose: a plain matmul.
  {
    ir::Builder b("no_transpose");
    b.output("out", b.matmul(testing::input(b, "x", random({3, 8})), testing::input(b, "w", random({8, 4}))));
    EXPECT_EQ(count_op(fuse(must(b.finish())), OpKind::kLinear), 0);
  }
  // Biases that are not an f32 [N] constant: the linear fuses, the add stays.
  for (int variant = 0; variant < 3; ++variant) {
    ir::Builder b("bias_miss");
    const V x = testing::input(b, "x", random({3, 8}));
    const V y = ir::ops::linear(x, testing::input(b, "w", random({4, 8})));
    V bias;
    if (variant == 0) bias = testing::input(b, "bias", random({1, 4}));          // wrong shape
    if (variant == 1) bias = testing::input(b, "bias", random({4})) * 2.0;       // an intermediate
    if (variant == 2) bias = testing::input(b, "bias", random({3, 4}));          // per row
    b.output("out", y + bias);
    const ir::Graph f = fuse(must(b.finish()));
    ASSERT_EQ(count_op(f, OpKind::kLinear), 1) << variant << ir::print(f);
    EXPECT_FALSE(find_eqn(f, OpKind::kLinear)->params.has_bias) << variant;
    EXPECT_EQ(count_op(f, OpKind::kAdd), 1) << variant;
  }
  // The product read elsewhere too: no bias epilogue.
  {
    ir::Builder b("product_shared");
    const V y = ir::ops::linear(testing::input(b, "x", random({3, 8})), testing::input(b, "w", random({4, 8})));
    b.output("out", y + testing::input(b, "bias", random({4})));
    b.output("y", y);
    const ir::Graph f = fuse(must(b.finish()));
    ASSERT_EQ(count_op(f, OpKind::kLinear), 1);
    EXPECT_FALSE(find_eqn(f, OpKind::kLinear)->params.has_bias);
  }
}

}  // namespace
}  // namespace kvf
