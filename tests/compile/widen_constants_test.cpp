// widen_kquant_constants: k-quant constants become f16 constants holding their dequantized
// values (to f16 rounding), one copy per weight however many step graphs use it; the graph
// still verifies and computes what it did.
#include <gtest/gtest.h>

#include <cmath>

#include "compile/widen_constants.h"
#include "core/kquants.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

class WidenConstants : public testing::SeededTest {
 protected:
  // Random rows quantized by kvforge's k-quant encoder.
  HostTensor kquant(DType dt, int64_t n, int64_t k) {
    const eval::Buffer x = random({n, k});
    const std::vector<float> f(x.data.begin(), x.data.end());
    HostTensor t = testing::must(HostTensor::zeros(dt, {n, k}));
    (dt == DType::kQ4_K ? quantize_q4_k : quantize_q6_k)(f.data(), t.data<uint8_t>(), n * k / kKQuantElems);
    return t;
  }
  ir::Graph graph(const HostTensor& w, const eval::Buffer& x) {
    ir::Builder b("widen");
    b.output("y", ir::ops::linear(testing::input(b, "x", x), b.cast(b.constant("w", w), DType::kF32)));
    return testing::must(b.finish());
  }
  static const ir::Value& constant(const ir::Graph& g) {
    for (const ir::Value& v : g.values) {
      if (v.kind == ir::ValueKind::kConstant && v.name == "w") return v;
    }
    ADD_FAILURE() << "no constant w";
    return g.values.front();
  }
};

TEST_F(WidenConstants, KQuantWeightsBecomeOneF16CopyEach) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  for (DType dt : {DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(dtype_name(dt));
    const HostTensor q = kquant(dt, 8, 512);
    const eval::Buffer x = random({1, 3, 512});
    const ir::Graph before = graph(q, x);
    ir::Graph a = before, b = graph(q, x);
    compile::WidenedConstants cache;
    ASSERT_TRUE(compile::widen_kquant_constants(a, cache).ok());
    ASSERT_TRUE(compile::widen_kquant_constants(b, cache).ok());
    EXPECT_EQ(cache.size(), 1u);
    const ir::Value& wa = constant(a);
    EXPECT_EQ(wa.type.dtype, DType::kF16);
    EXPECT_EQ(wa.data.dtype(), DType::kF16);
    EXPECT_EQ(wa.data.raw(), constant(b).data.raw());  // the second graph shares the first's copy
    const std::vector<float> exact = testing::must(q.to_f32()), wide = testing::must(wa.data.to_f32());
    ASSERT_EQ(exact.size(), wide.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      ASSERT_LE(std::fabs(wide[i] - exact[i]), std::ldexp(std::fabs(exact[i]), -11) + 1e-7f) << i;  // f16: half an ulp
    }
    const eval::Buffer y0 = testing::must(testing::run_graph(before)).at("y");
    const eval::Buffer y1 = testing::must(testing::run_graph(a)).at("y");
    EXPECT_LE(testing::rel_error(y1.data, y0.data), 1e-3);
  }
}

TEST_F(WidenConstants, OtherConstantsAreLeftAlone) {
  const HostTensor w = testing::random_weight(DType::kQ8_0, 8, 64, rng_);
  ir::Graph g = graph(w, random({1, 2, 64}));
  compile::WidenedConstants cache;
  ASSERT_TRUE(compile::widen_kquant_constants(g, cache).ok());
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(constant(g).type.dtype, DType::kQ8_0);
  EXPECT_EQ(constant(g).data.raw(), w.raw());
}

}  // namespace
}  // namespace kvf
