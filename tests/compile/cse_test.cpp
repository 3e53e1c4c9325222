// cse: repeats of (op, params, operands) merge, transitively; equal literals merge; eqns
// that differ in params, operands or literal bits/dtype stay apart; bits are unchanged.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "ir/printer.h"
#include "ir/ops.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
using testing::count_op;
using testing::expect_same_outputs;
using testing::must;

int literals(const ir::Graph& g) {
  int n = 0;
  for (const ir::Value& v : g.values) n += v.kind == ir::ValueKind::kLiteral;
  return n;
}

ir::Graph cse(const ir::Graph& g) { return must(compile::cse_pass().run(g)); }

class Cse : public testing::SeededTest {};

TEST_F(Cse, RepeatsMergeTransitively) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("repeats");
  const V x = testing::input(b, "x", random({3, 5}));
  auto body = [&] { return b.unary(OpKind::kExp, x) * 2.0 + 1.0; };  // exp, mul, add + 2 literals
  const V a = body();
  const V c = body();
  b.output("out", a * c);
  const ir::Graph g = must(b.finish());
  ASSERT_EQ(g.eqns.size(), 7u);
  const ir::Graph m = cse(g);
  EXPECT_EQ(m.eqns.size(), 4u) << ir::print(m);
  EXPECT_EQ(literals(m), 2);
  const ir::Eqn& last = m.eqns.back();
  EXPECT_EQ(last.in[0], last.in[1]);  // a * a
  expect_same_outputs(g, m);
}

TEST_F(Cse, DifferentParamsOperandsOrLiteralsStayApart) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("apart");
  const V x = testing::input(b, "x", random({4, 4}));
  const V y = testing::input(b, "y", random({4, 4}));
  b.output("axes", b.reduce_sum(x, {0}) + b.reduce_sum(x, {1}));
  b.output("keepdim", b.reduce_max(x, {1}, true) + b.reduce_max(x, {1}, false));  // [4,1] + [4] -> [4,4]
  b.output("perm", b.transpose(x, {1, 0}) + b.transpose(x, {0, 1}));
  b.output("slice", b.slice_axis(x, 0, 0, 2) + b.slice_axis(x, 0, 2, 4));
  b.output("operands", b.unary(OpKind::kExp, x) + b.unary(OpKind::kExp, y));
  b.output("cmp", b.select(b.compare(x, y, ir::CmpDir::kLt), x, y) + b.select(b.compare(x, y, ir::CmpDir::kLe), x, y));
  b.output("zeros", (x + 0.0) * (x + (-0.0)));  // +0 and -0 differ in bits
  const V h = b.cast(x, DType::kF16);
  b.output("dtypes", b.cast(h * b.literal(0.5, DType::kF16), DType::kF32) + x * 0.5);
  const ir::Graph g = must(b.finish());
  const ir::Graph m = cse(g);
  EXPECT_EQ(m.eqns.size(), g.eqns.size()) << ir::print(m);
  expect_same_outputs(g, m);
}

TEST_F(Cse, EqualLiteralsMergeAcrossEqns) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("literals");
  const V x = testing::input(b, "x", random({6}));
  const V y = testing::input(b, "y", random({6}));
  b.output("out", (x * 0.5) + (y * 0.5) + (x * 0.5));  // x * 0.5 twice: one eqn
  const ir::Graph g = must(b.finish());
  EXPECT_EQ(literals(g), 3);
  const ir::Graph m = cse(g);
  EXPECT_EQ(literals(m), 1) << ir::print(m);
  EXPECT_EQ(count_op(m, OpKind::kMul), 2);
  expect_same_outputs(g, m);
}

// Fresh iota and index guards per layer in the traced llama: cse leaves one of each.
TEST_F(Cse, MergesTheTracersRepeatsInAModelStep) {
  const models::Model model = must(models::open_model("synthetic:llama-260k", {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  const ir::Graph g = must(model.trace_step({.n_tokens = 2, .capacity = 8, .cached = true}));
  const ir::Graph m = cse(g);
  EXPECT_LT(m.eqns.size(), g.eqns.size());
  EXPECT_EQ(count_op(m, OpKind::kIota), 1) << "iotas before: " << count_op(g, OpKind::kIota);
  EXPECT_EQ(must(compile::cse_pass().run(m)).eqns.size(), m.eqns.size());  // a fixed point
}

}  // namespace
}  // namespace kvf
