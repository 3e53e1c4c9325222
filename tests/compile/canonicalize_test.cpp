// canonicalize: every no-op eqn goes, every near-miss stays, reshape chains fold into one,
// transposes that move no element become reshapes, and the graph after the pass gives the
// same bits on the oracle (Precision::kNative).
#include <gtest/gtest.h>

#include <limits>

#include "compile/passes.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
using testing::count_op;
using testing::expect_same_outputs;
using testing::must;

ir::Graph canonicalize(const ir::Graph& g) { return must(compile::canonicalize_pass().run(g)); }

class Canonicalize : public testing::SeededTest {};

TEST_F(Canonicalize, DropsEveryNoOp) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("noops");
  const V x = testing::input(b, "x", random({2, 3, 4}));
  V y = b.reshape(x, {2, 3, 4});
  y = b.transpose(y, {0, 1, 2});
  y = b.broadcast(y, {2, 3, 4});
  y = b.cast(y, DType::kF32);
  y = b.slice(y, {0, 0, 0}, {2, 3, 4}, {1, 1, 1});
  y = y * 1.0;
  y = 1.0 * y;
  y = y / 1.0;
  y = y - 0.0;       // x - +0 is x, even for x = -0
  y = y + (-0.0);    // x + -0 is x, even for x = -0
  b.output("out", b.unary(OpKind::kExp, y));
  const ir::Graph g = must(b.finish());
  const ir::Graph c = canonicalize(g);
  ASSERT_EQ(g.eqns.size(), 11u);
  ASSERT_EQ(c.eqns.size(), 1u) << ir::print(c);
  EXPECT_EQ(c.eqns[0].op, OpKind::kExp);
  EXPECT_EQ(c.value(c.eqns[0].in[0]).kind, ir::ValueKind::kConstant);
  expect_same_outputs(g, c);
}

TEST_F(Canonicalize, KeepsNearMisses) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("near_misses");
  const V x = testing::input(b, "x", random({2, 3, 4}));
  b.output("reshape", b.reshape(x, {6, 4}));
  b.output("transpose", b.transpose(x, {1, 0, 2}));
  b.output("broadcast", b.broadcast(x, {2, 2, 3, 4}));
  b.output("cast", b.cast(x, DType::kF16));
  b.output("slice", b.slice(x, {0, 1, 0}, {2, 3, 4}));
  b.output("strided", b.slice(x, {0, 0, 0}, {2, 3, 4}, {1, 1, 2}));
  b.output("times2", x * 2.0);
  b.output("over2", x / 2.0);
  b.output("one_over", 1.0 / x);
  b.output("minus_neg_zero", x - (-0.0));  // -0 - -0 is +0: not neutral
  b.output("one_minus", 0.0 - x);
  const ir::Graph g = must(b.finish());
  const ir::Graph c = canonicalize(g);
  EXPECT_EQ(c.eqns.size(), g.eqns.size()) << ir::print(c);
  expect_same_outputs(g, c);
}

// x + 0.0 is not x in IEEE arithmetic: -0 + +0 = +0. The pass keeps it, and the oracle
// shows why (the sign of zero is a bit of the output, and it decides 1/x).
TEST_F(Canonicalize, PlusPositiveZeroStaysForFloatsAndGoesForIntegers) {
  ir::Builder b("plus_zero");
  const V x = testing::input(b, "x", must(eval::Buffer::of(DType::kF32, {3}, {-0.0, 0.0, 1.5})));
  const V i = testing::input(b, "i", must(eval::Buffer::i32({3}, {-4, 0, 7})));
  const V sum = x + 0.0;
  b.output("recip", b.unary(OpKind::kRecip, sum));
  b.output("int", b.unary(OpKind::kNeg, i + b.literal(0.0, DType::kI32)));
  const ir::Graph g = must(b.finish());
  const ir::Graph c = canonicalize(g);
  EXPECT_EQ(count_op(c, OpKind::kAdd), 1) << ir::print(c);  // the float add stays, the i32 one goes
  const eval::Outputs out = must(testing::run_graph(c, {}, eval::Precision::kNative));
  EXPECT_EQ(out.at("recip").data[0], std::numeric_limits<double>::infinity());  // 1 / (-0 + 0) = 1 / +0
  EXPECT_EQ(out.at("int").data, (std::vector<double>{4, 0, -7}));
  const ir::Eqn& neg = c.eqns.back();
  EXPECT_EQ(c.value(neg.in[0]).kind, ir::ValueKind::kConstant);
}

TEST_F(Canonicalize, FoldsReshapeChainsIntoOne) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("reshapes");
  const V x = testing::input(b, "x", random({2, 3, 4}));
  const V r1 = b.reshape(x, {6, 4});
  const V r2 = b.reshape(r1, {24});
  b.output("folded", b.reshape(r2, {4, 6}));
  b.output("back", b.unary(OpKind::kExp, b.reshape(b.reshape(x, {4, 6}), {2, 3, 4})));  // back to x: no reshape
  const V shared = b.reshape(x, {3, 8});  // read by a reshape and by exp: stays for exp
  b.output("shared_exp", b.unary(OpKind::kExp, shared));
  b.output("shared_fold", b.reshape(shared, {8, 3}));
  const ir::Graph g = must(b.finish());
  const ir::Graph c = canonicalize(g);
  // folded: x->[4,6]; back: none; shared: x->[3,8] (for exp) and x->[8,3].
  EXPECT_EQ(count_op(c, OpKind::kReshape), 3) << ir::print(c);
  for (const ir::Eqn& e : c.eqns) {
    if (e.op == OpKind::kReshape) {
      EXPECT_EQ(c.value(e.in[0]).kind, ir::ValueKind::kConstant) << ir::print(c);
    }
  }
  expect_same_outputs(g, c);
}

// A batched step's heads: [1, rows, H, d] split into heads [1, H, rows, d], then as rows
// [rows, H, 1, d]; the way back the same. Each transpose moves elements, the pair does not.
TEST_F(Canonicalize, TransposeChainsThatMoveNothingBecomeReshapes) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("heads");
  const V x = testing::input(b, "x", random({1, 3, 2, 4}));
  const V heads = b.transpose(x, {0, 2, 1, 3});                            // [1, 2, 3, 4]
  const V rows = b.transpose(b.reshape(heads, {2, 3, 1, 4}), {1, 0, 2, 3});  // [3, 2, 1, 4]: x's order
  b.output("rows", b.unary(OpKind::kExp, rows));
  const V back = b.transpose(b.reshape(b.transpose(rows, {1, 0, 2, 3}), {1, 2, 3, 4}), {0, 2, 1, 3});
  b.output("back", b.unary(OpKind::kNeg, back));                             // x again
  b.output("unit_axes", b.transpose(b.transpose(x, {1, 0, 2, 3}), {0, 2, 1, 3}));  // size-1 axes and back
  const ir::Graph g = must(b.finish());
  const ir::Graph c = must(compile::dce_pass().run(canonicalize(g)));  // the undone transposes are dead
  EXPECT_EQ(count_op(g, OpKind::kTranspose), 6);
  EXPECT_EQ(count_op(c, OpKind::kTranspose), 0) << ir::print(c);
  for (const ir::Eqn& e : c.eqns) {  // back is x itself, not even a reshape of it
    if (e.op == OpKind::kNeg) {
      EXPECT_EQ(c.value(e.in[0]).kind, ir::ValueKind::kConstant) << ir::print(c);
    }
  }
  expect_same_outputs(g, c);
}

// Transposes that do move elements stay: one read elsewhere (its chain still folds through
// it), a pair whose second makes a different axis swap, a chain through a slice, and a lone
// transpose of size-1 axes (the spelling the attention pass matches).
TEST_F(Canonicalize, TransposeChainsThatMoveElementsStay) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  ir::Builder b("moving");
  const V x = testing::input(b, "x", random({1, 3, 2, 4}));
  const V heads = b.transpose(x, {0, 2, 1, 3});
  b.output("heads_exp", b.unary(OpKind::kExp, heads));  // read: stays
  b.output("rows", b.transpose(b.reshape(heads, {2, 3, 1, 4}), {1, 0, 2, 3}));  // folds to x
  b.output("swapped", b.transpose(heads, {0, 1, 3, 2}));  // [1, 2, 4, 3]: moves
  b.output("sliced", b.transpose(b.slice(heads, {0, 0, 0, 0}, {1, 2, 2, 4}), {0, 2, 1, 3}));
  b.output("unit_axes", b.transpose(b.reshape(x, {1, 1, 6, 4}), {1, 0, 2, 3}));
  const ir::Graph g = must(b.finish());
  const ir::Graph c = must(compile::dce_pass().run(canonicalize(g)));
  EXPECT_EQ(count_op(c, OpKind::kTranspose), 4) << ir::print(c);  // heads, swapped, sliced's, unit_axes
  expect_same_outputs(g, c);
}

TEST_F(Canonicalize, OutputsThatAreNoOpsOfSlotsStillPublish) {
  ir::Builder b("slot_out");
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {3});
  b.output("pos", b.reshape(pos, {3}));
  b.output("pos2", b.cast(pos, DType::kI32) * b.like(pos, 1.0));
  const ir::Graph g = must(b.finish());
  const ir::Graph c = canonicalize(g);
  EXPECT_TRUE(c.eqns.empty()) << ir::print(c);
  const eval::SlotBindings slots{{ir::Slot::kPos, must(eval::Buffer::i32({3}, {5, 6, 7}))}};
  expect_same_outputs(g, c, slots);
}

}  // namespace
}  // namespace kvf
