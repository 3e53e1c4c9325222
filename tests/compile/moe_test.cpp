// moe: the routed experts' sum models::moe_ffn traces becomes one Moe eqn over x, the
// routing weights and every expert's three weights, keeping every bit on the oracle and on
// the CPU executor (which runs each expert on the rows that picked it alone); sums it cannot
// prove are the routed experts' keep their eqns.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "exec/cpu/executor.h"
#include "ir/infer.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "models/moe.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using testing::count_op;
using testing::must;

constexpr int64_t kDim = 64, kFfn = 32;

class MoePass : public testing::SeededTest {
 protected:
  // n rows of x through E experts (k picked a row) stored as dt, traced as the models trace them.
  ir::Graph traced(int64_t n, int64_t experts, int64_t k, DType dt, bool renormalize = true) {
    models::ModelConfig c;
    c.arch = "test";
    c.dim = kDim;
    c.n_experts = experts;
    c.n_experts_used = k;
    c.expert_hidden_dim = kFfn;
    c.expert_weights_norm = renormalize;
    models::Weights w;
    w.add("blk.0.ffn_gate_inp.weight", testing::random_weight(DType::kF32, experts, kDim, rng_));
    for (int64_t e = 0; e < experts; ++e) {
      w.add(str_cat("blk.0.ffn_gate_exp.", e, ".weight"), testing::random_weight(dt, kFfn, kDim, rng_));
      w.add(str_cat("blk.0.ffn_up_exp.", e, ".weight"), testing::random_weight(dt, kFfn, kDim, rng_));
      w.add(str_cat("blk.0.ffn_down_exp.", e, ".weight"), testing::random_weight(dt, kDim, kFfn, rng_));
    }
    ir::Builder b("moe");
    b.output("out", models::moe_ffn(c, w, "blk.0.", testing::input(b, "x", random({1, n, kDim}))));
    return must(b.finish());
  }

  // The default passes, with or without moe.
  static ir::Graph compiled(const ir::Graph& g, bool with_moe) {
    std::vector<compile::Pass> passes;
    for (compile::Pass& p : compile::default_passes()) {
      if (with_moe || p.name != "moe") passes.push_back(std::move(p));
    }
    return must(compile::run_passes(g, passes)).graph;
  }
};

std::vector<float> run_cpu(const ir::Graph& g) {
  ThreadPool pool(2);
  exec::StateStore state;
  auto ex = must(exec::cpu::CpuExecutor::create(must(plan::make_plan(g, plan::cpu_caps(2))), state, pool));
  Status s = ex->run({});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  const std::span<const float> out = ex->output("out");
  return {out.begin(), out.end()};
}

TEST_F(MoePass, FormsOneEqnOverEveryExpertAndKeepsEveryBit) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  for (DType dt : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE(dtype_name(dt));
    const ir::Graph g = traced(7, 4, 2, dt);
    const ir::Graph chain = compiled(g, false), fused = compiled(g, true);
    ASSERT_EQ(count_op(fused, OpKind::kMoe), 1) << ir::print(fused);
    const ir::Eqn& moe = *testing::find_eqn(fused, OpKind::kMoe);
    EXPECT_EQ(moe.in.size(), 2u + 3 * 4);
    EXPECT_EQ(moe.params.glu, ir::GluAct::kSilu);
    EXPECT_EQ(count_op(fused, OpKind::kLinear), 1);  // the router's
    EXPECT_EQ(count_op(fused, OpKind::kGlu), 0);
    testing::expect_same_outputs(chain, fused);
    // The CPU runs 2 of 4 experts a row, and each picked term has the chain's bits.
    EXPECT_EQ(run_cpu(fused), run_cpu(chain));
  }
}

// Top-1 (rows with one expert each) and top-E (every expert for every row), unnormalized.
TEST_F(MoePass, EveryTopKFromOneToAllExperts) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  for (int64_t k : {1, 3}) {
    const ir::Graph g = traced(5, 3, k, DType::kF32, false);
    const ir::Graph chain = compiled(g, false), fused = compiled(g, true);
    ASSERT_EQ(count_op(fused, OpKind::kMoe), 1) << ir::print(fused);
    testing::expect_same_outputs(chain, fused);
    EXPECT_EQ(run_cpu(fused), run_cpu(chain));
  }
}

// A sum of expert terms that leaves an expert out is not the routed experts' sum.
TEST_F(MoePass, DeclinesASumThatSkipsAnExpert) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("partial");
  const ir::V x = testing::input(b, "x", random({1, 3, kDim})), w = testing::input(b, "w", random({1, 3, 3}));
  ir::V out;
  for (int64_t e : {0, 2}) {
    auto weight = [&](const char* kind, int64_t n, int64_t k) {
      return b.constant(str_cat(kind, e), testing::random_weight(DType::kF32, n, k, rng_));
    };
    const ir::V unit = ir::ops::linear(
        ir::ops::swiglu(ir::ops::linear(x, weight("gate", kFfn, kDim)), ir::ops::linear(x, weight("up", kFfn, kDim))),
        weight("down", kDim, kFfn));
    const ir::V term = unit * b.broadcast(b.slice_axis(w, -1, e, e + 1), {1, 3, kDim});
    out = e == 0 ? term : out + term;
  }
  b.output("out", out);
  const ir::Graph fused = compiled(must(b.finish()), true);
  EXPECT_EQ(count_op(fused, OpKind::kMoe), 0) << ir::print(fused);
  EXPECT_EQ(count_op(fused, OpKind::kLinear), 6);
}

Result<ir::TensorType> moe_type(std::vector<ir::TensorType> in) { return ir::infer(OpKind::kMoe, {}, in); }

TEST(MoeEqn, TypingRefusesMisshapedExperts) {
  const ir::TensorType x{DType::kF32, {1, 2, 8}}, w{DType::kF32, {1, 2, 2}};
  const ir::TensorType gate{DType::kF16, {4, 8}}, down{DType::kF16, {8, 4}};
  const Result<ir::TensorType> ok = moe_type({x, w, gate, gate, gate, gate, down, down});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, x);
  const Result<ir::TensorType> bad_down = moe_type({x, w, gate, gate, gate, gate, gate, down});
  ASSERT_FALSE(bad_down.ok());
  EXPECT_TRUE(testing::mentions(bad_down.error(), "down weight 0"));
  const Result<ir::TensorType> bad_routing = moe_type({x, ir::TensorType{DType::kF32, {1, 2, 3}}, gate, gate, gate, gate, down, down});
  ASSERT_FALSE(bad_routing.ok());
  EXPECT_TRUE(testing::mentions(bad_routing.error(), "for 2 experts"));
  EXPECT_FALSE(moe_type({x, w, gate, gate, down}).ok());
}

}  // namespace
}  // namespace kvf
