// Builder: sticky first errors and poisoned handles, axis normalization, reshape's -1,
// slots, naming, operator overloads, verify() on hand-corrupted graphs, and the printer.
#include "ir/builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ir/infer.h"
#include "ir/ops.h"
#include "ir/printer.h"

namespace kvf::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

V cst(Builder& b, const std::string& name, Shape shape, DType dt = DType::kF32) {
  Result<HostTensor> t = HostTensor::zeros(dt, std::move(shape));
  if (!t) {
    ADD_FAILURE() << t.take_error().to_string();
    return {};
  }
  return b.constant(name, std::move(*t));
}

const Eqn& last_eqn(const Builder& b) { return b.graph().eqns.back(); }

// ---------------------------------------------------------------- sticky errors

TEST(Builder, FirstErrorSticksAndFinishReturnsIt) {
  Builder b("g");
  V x = cst(b, "x", {2});
  V y = cst(b, "y", {3});
  EXPECT_FALSE(b.failed());
  V bad = x + y;  // [2] and [3] do not broadcast
  EXPECT_FALSE(bad.valid());
  EXPECT_TRUE(b.failed());
  EXPECT_TRUE(b.graph().eqns.empty()) << "a refused eqn is not appended";
  const size_t n_values = b.graph().values.size();

  // A second, different error must not replace the first.
  V r = b.reshape(x, {5});
  EXPECT_FALSE(r.valid());
  b.fail(invalid_input("a later failure"));
  V leaf = b.literal(1.0);  // leaves are poisoned too once tracing failed
  EXPECT_FALSE(leaf.valid());
  EXPECT_FALSE(b.slot(Slot::kPos, DType::kI32, {1}).valid());
  EXPECT_FALSE(b.state("s", DType::kF32, {1}).valid());
  EXPECT_EQ(b.graph().values.size(), n_values) << "nothing is added after the failure";

  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  const Error& e = g.error();
  EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
  EXPECT_THAT(e.message(), HasSubstr("add"));
  EXPECT_THAT(e.message(), HasSubstr("[2]"));
  EXPECT_THAT(e.message(), Not(HasSubstr("reshape")));
  EXPECT_THAT(e.message(), Not(HasSubstr("later")));
  // finish() keeps reporting the same error.
  Result<Graph> again = b.finish();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message(), e.message());
}

TEST(Builder, ExplicitFailIsFirstToo) {
  Builder b("g");
  V x = cst(b, "x", {2});
  b.fail(unsupported("model feature X"));
  V y = b.unary(OpKind::kExp, x);
  EXPECT_FALSE(y.valid());
  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(g.error().message(), "model feature X");
}

TEST(Builder, ChainingOnPoisonedValuesDoesNotCrash) {
  Builder b("g");
  V x = cst(b, "x", {2, 3});
  V bad = b.matmul(x, x);  // [2,3] x [2,3]: contracting dims differ
  ASSERT_FALSE(bad.valid());
  V z = (bad + 1.0) * bad;
  z = -z;
  z = 2.0 / z - x;
  z = b.reduce_sum(z, {-1}, true);
  z = b.reduce_max(z, {0});
  z = b.reshape(z, {-1});
  z = b.transpose(z, {1, 0});
  z = b.broadcast(z, {4, 2, 3});
  z = b.slice_axis(z, -1, 0, 1);
  z = b.slice(z, {0}, {1});
  z = b.concat({z, x}, -1);
  z = b.cast(z, DType::kF16);
  z = b.gather(z, z);
  z = b.scatter_update(z, z, z);
  z = b.dynamic_update_slice(z, z, z, -1);
  z = b.select(z, z, z);
  z = b.compare(z, x, CmpDir::kLt);
  z = b.like(z, 3.0);
  z = b.name(z, "n");
  z = b.name(z, "n", 2);
  b.output("o", z);
  b.donate(z, z);
  b.validate(z, "w");
  EXPECT_FALSE(z.valid());
  EXPECT_EQ(z.rank(), 0);
  EXPECT_EQ(z.dim(-1), 0);
  EXPECT_TRUE(b.graph().outputs.empty());
  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
  EXPECT_THAT(g.error().message(), HasSubstr("matmul"));
}

// The mask builders on a poisoned trace (a slot's value made invalid by an earlier failure):
// an invalid mask, never a crash (its reshape once read axes the poison does not have).
TEST(Builder, MasksOverPoisonedPositionsDoNotCrash) {
  Builder b("g");
  V x = cst(b, "x", {2, 3});
  V bad_pos = b.matmul(x, x);
  ASSERT_FALSE(bad_pos.valid());
  const V keys = ops::key_positions(b, 4);
  EXPECT_FALSE(ops::span_mask(bad_pos, keys, {}).valid());
  EXPECT_FALSE(ops::sliding_window_mask(bad_pos, 4, 2).valid());
  EXPECT_FALSE(b.finish().ok());
}

TEST(Builder, DefaultHandlesDoNotCrash) {
  V none;
  EXPECT_FALSE(none.valid());
  EXPECT_FALSE((none + none).valid());
  EXPECT_FALSE((none * 2.0).valid());
  EXPECT_FALSE((1.0 - none).valid());
  EXPECT_FALSE((-none).valid());
  EXPECT_EQ(none.rank(), 0);
}

TEST(Builder, ForeignOrInvalidOperandIsAnInternalError) {
  Builder a("a"), other("other");
  V x = cst(a, "x", {2});
  V y = cst(other, "y", {2});
  EXPECT_FALSE(a.binary(OpKind::kAdd, x, y).valid());
  Result<Graph> g = a.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInternal);

  Builder c("c");
  V z = cst(c, "z", {2});
  EXPECT_FALSE((z + V{}).valid());
  Result<Graph> gc = c.finish();
  ASSERT_FALSE(gc.ok());
  EXPECT_EQ(gc.error().code(), ErrorCode::kInternal);

  Result<Graph> fine = other.finish();  // the other builder is unaffected
  EXPECT_TRUE(fine.ok());
}

// ---------------------------------------------------------------- reshape / axes

TEST(Builder, ReshapeInfersMinusOne) {
  Builder b("g");
  V x = cst(b, "x", {2, 3, 4});
  EXPECT_EQ(b.reshape(x, {-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(last_eqn(b).params.shape, (Shape{6, 4})) << "the eqn stores the resolved shape";
  EXPECT_EQ(b.reshape(x, {2, -1}).shape(), (Shape{2, 12}));
  EXPECT_EQ(b.reshape(x, {-1}).shape(), (Shape{24}));
  EXPECT_EQ(b.reshape(x, {1, -1, 1, 3}).shape(), (Shape{1, 8, 1, 3}));
  V e = cst(b, "e", {0, 3});
  EXPECT_EQ(b.reshape(e, {-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_TRUE(b.finish().ok());
}

TEST(Builder, ReshapeMinusOneRefusals) {
  {
    Builder b("g");
    V x = cst(b, "x", {2, 3, 4});
    EXPECT_FALSE(b.reshape(x, {-1, -1}).valid());  // two unknowns
    Result<Graph> g = b.finish();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
  }
  {
    Builder b("g");
    V x = cst(b, "x", {2, 3, 4});
    EXPECT_FALSE(b.reshape(x, {5, -1}).valid());  // 24 is not a multiple of 5
    Result<Graph> g = b.finish();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
  }
  {
    Builder b("g");
    V x = cst(b, "x", {2, 3, 4});
    EXPECT_FALSE(b.reshape(x, {5, 5}).valid());
    Result<Graph> g = b.finish();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
  }
}

TEST(Builder, NegativeAxesAreNormalized) {
  Builder b("g");
  V x = cst(b, "x", {2, 3, 4});
  EXPECT_EQ(x.dim(-1), 4);
  EXPECT_EQ(x.dim(-3), 2);
  EXPECT_EQ(x.dim(1), 3);
  EXPECT_EQ(x.dim(3), 0);
  EXPECT_EQ(x.dim(-4), 0);

  EXPECT_EQ(b.reduce_sum(x, {-1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(last_eqn(b).params.axes, (std::vector<int64_t>{2}));
  EXPECT_EQ(b.reduce_max(x, {-3, -1}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(last_eqn(b).params.axes, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(last_eqn(b).params.keepdim);

  EXPECT_EQ(b.transpose(x, {-1, -3, -2}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(last_eqn(b).params.axes, (std::vector<int64_t>{2, 0, 1}));

  EXPECT_EQ(b.concat({x, x}, -1).shape(), (Shape{2, 3, 8}));
  EXPECT_EQ(last_eqn(b).params.axis, 2);

  EXPECT_EQ(b.slice_axis(x, -2, 1, 3).shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(last_eqn(b).params.starts, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(last_eqn(b).params.limits, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(b.slice_axis(x, -1, 0, 4, 3).shape(), (Shape{2, 3, 2}));

  V io = b.iota({3, 5}, -1);
  EXPECT_EQ(io.type(), (TensorType{DType::kI32, {3, 5}}));
  EXPECT_EQ(last_eqn(b).params.axis, 1);

  V cache = b.state("k", DType::kF32, {2, 8, 4}, StateRole::kKeyCache, 0);
  V upd = cst(b, "upd", {2, 3, 4});
  V start = b.slot(Slot::kPos, DType::kI32, {1});
  V w = b.dynamic_update_slice(cache, upd, start, -2);
  EXPECT_EQ(w.type(), cache.type());
  EXPECT_EQ(last_eqn(b).params.axis, 1);
  b.donate(cache, w);
  b.output("out", w);
  EXPECT_TRUE(b.finish().ok());
}

TEST(Builder, AxisTooNegativeIsRefused) {
  Builder b("g");
  V x = cst(b, "x", {2, 3});
  EXPECT_FALSE(b.reduce_sum(x, {-3}).valid());
  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
}

TEST(Builder, SliceAxisOutOfRangeIsRefused) {
  for (int64_t axis : {2, 5, -3}) {
    SCOPED_TRACE(::testing::Message() << "axis=" << axis);
    Builder b("g");
    V x = cst(b, "x", {2, 3});
    // Must not silently slice nothing and hand back all of x.
    EXPECT_FALSE(b.slice_axis(x, axis, 0, 1).valid());
    Result<Graph> g = b.finish();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(g.error().message(), HasSubstr("slice"));
  }
}

// ---------------------------------------------------------------- leaves and names

TEST(Builder, SlotDeclaredTwice) {
  Builder b("g");
  V a = b.slot(Slot::kPos, DType::kI32, {4});
  V again = b.slot(Slot::kPos, DType::kI32, {4});
  EXPECT_EQ(a.id, again.id);
  V tok = b.slot(Slot::kToken, DType::kI32, {4});
  EXPECT_NE(tok.id, a.id);
  EXPECT_EQ(b.graph().find_slot(Slot::kPos), a.id);
  EXPECT_EQ(b.graph().find_slot(Slot::kToken), tok.id);
  EXPECT_EQ(b.graph().find_slot(Slot::kSeqLen), -1);
  EXPECT_EQ(b.graph().value(a.id).name, "pos");
  EXPECT_EQ(b.graph().value(a.id).kind, ValueKind::kSlot);
  b.output("o", a + tok);
  EXPECT_TRUE(b.finish().ok());
}

TEST(Builder, SlotWithConflictingTypesIsAnError) {
  for (TensorType other : {TensorType{DType::kI32, {5}}, TensorType{DType::kF32, {4}}}) {
    Builder b("g");
    V a = b.slot(Slot::kPos, DType::kI32, {4});
    EXPECT_TRUE(a.valid());
    EXPECT_FALSE(b.slot(Slot::kPos, other.dtype, other.shape).valid());
    Result<Graph> g = b.finish();
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
    EXPECT_THAT(g.error().message(), HasSubstr("pos"));
  }
}

TEST(Builder, LiteralsAndConstants) {
  Builder b("g");
  V l = b.literal(-0.25, DType::kBF16);
  const Value& lv = b.graph().value(l.id);
  EXPECT_EQ(lv.kind, ValueKind::kLiteral);
  EXPECT_EQ(lv.literal, -0.25);
  EXPECT_EQ(lv.type, (TensorType{DType::kBF16, {}}));
  V c = cst(b, "w", {3, 2}, DType::kF16);
  const Value& cv = b.graph().value(c.id);
  EXPECT_EQ(cv.kind, ValueKind::kConstant);
  EXPECT_EQ(cv.name, "w");
  EXPECT_EQ(cv.type, (TensorType{DType::kF16, {3, 2}}));
  EXPECT_EQ(cv.data.shape(), (Shape{3, 2}));
}

TEST(Builder, DuplicateLeafNamesAreRejected) {
  {
    Builder b("g");
    cst(b, "w", {2});
    cst(b, "w", {3});
    EXPECT_FALSE(b.finish().ok());
  }
  {
    Builder b("g");  // constants and state share one namespace
    cst(b, "w", {2});
    b.state("w", DType::kF32, {2});
    EXPECT_FALSE(b.finish().ok());
  }
  {
    Builder b("g");  // intermediates are a separate namespace
    V w = cst(b, "w", {2});
    b.output("o", b.name(w * 2.0, "w"));
    EXPECT_TRUE(b.finish().ok());
  }
  {
    Builder b("g");
    V w = cst(b, "w", {2});
    b.name(w * 2.0, "h");
    b.name(w * 3.0, "h");
    EXPECT_FALSE(b.finish().ok());
  }
}

TEST(Builder, NamesIntermediatesOnly) {
  Builder b("g");
  V w = cst(b, "w", {2});
  V y = b.name(w + 1.0, "h", 3);
  EXPECT_EQ(b.graph().value(y.id).name, "h.3");
  b.name(y, "other");  // the first name stays
  EXPECT_EQ(b.graph().value(y.id).name, "h.3");
  b.name(w, "renamed");  // leaves keep theirs
  EXPECT_EQ(b.graph().value(w.id).name, "w");
}

// ---------------------------------------------------------------- operators

TEST(Builder, OperatorOverloadsEmitArithmetic) {
  Builder b("g");
  V x = cst(b, "x", {2}, DType::kF16);
  V y = cst(b, "y", {2}, DType::kF16);
  auto check_lit = [&](V r, OpKind op, int lit_pos, double value, V other) {
    ASSERT_TRUE(r.valid());
    EXPECT_EQ(r.type(), (TensorType{DType::kF16, {2}}));
    const Eqn& e = last_eqn(b);
    EXPECT_EQ(e.op, op);
    EXPECT_EQ(e.out, r.id);
    ASSERT_EQ(e.in.size(), 2u);
    const Value& lit = b.graph().value(e.in[lit_pos]);
    EXPECT_EQ(lit.kind, ValueKind::kLiteral);
    EXPECT_EQ(lit.literal, value);
    EXPECT_EQ(lit.type, (TensorType{DType::kF16, {}})) << "literal takes the other operand's dtype";
    EXPECT_EQ(e.in[1 - lit_pos], other.id);
  };
  check_lit(x + 1.5, OpKind::kAdd, 1, 1.5, x);
  check_lit(x - 2.0, OpKind::kSub, 1, 2.0, x);
  check_lit(x * 0.5, OpKind::kMul, 1, 0.5, x);
  check_lit(x / 4.0, OpKind::kDiv, 1, 4.0, x);
  check_lit(3.0 + y, OpKind::kAdd, 0, 3.0, y);
  check_lit(3.0 - y, OpKind::kSub, 0, 3.0, y);
  check_lit(-1.0 * y, OpKind::kMul, 0, -1.0, y);
  check_lit(1.0 / y, OpKind::kDiv, 0, 1.0, y);

  const std::pair<V, OpKind> pairs[] = {
      {x + y, OpKind::kAdd}, {x - y, OpKind::kSub}, {x * y, OpKind::kMul}, {x / y, OpKind::kDiv}};
  for (const auto& [r, op] : pairs) {
    ASSERT_TRUE(r.valid());
    const Eqn& e = b.graph().eqns[static_cast<size_t>(b.graph().value(r.id).producer)];
    EXPECT_EQ(e.op, op);
    EXPECT_EQ(e.in, (std::vector<ValueId>{x.id, y.id}));
  }
  V n = -x;
  EXPECT_EQ(last_eqn(b).op, OpKind::kNeg);
  EXPECT_EQ(last_eqn(b).in, (std::vector<ValueId>{x.id}));
  EXPECT_EQ(n.type(), x.type());
  b.output("n", n);
  EXPECT_TRUE(b.finish().ok());
}

TEST(Builder, MixedDTypeArithmeticIsRefused) {
  Builder b("g");
  V x = cst(b, "x", {2}, DType::kF16);
  V y = cst(b, "y", {2});
  EXPECT_FALSE((x + y).valid());
  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
}

// ---------------------------------------------------------------- verify

// x:f32[2,3] -> exp -> reduce_sum over axis 1 -> out; plus a state donated from itself + 1.
Graph small_graph() {
  Builder b("small");
  V x = cst(b, "x", {2, 3});
  V s = b.reduce_sum(b.unary(OpKind::kExp, x), {1});
  b.output("out", s);
  V st = b.state("st", DType::kF32, {2});
  b.donate(st, st + s);
  b.validate(b.compare(s, b.like(s, 0.0), CmpDir::kGe), "sum is non-negative");
  Result<Graph> g = b.finish();
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return g.ok() ? std::move(*g) : Graph{};
}

TEST(Verify, AcceptsTheBuiltGraph) {
  Graph g = small_graph();
  ASSERT_EQ(g.eqns.size(), 4u);  // exp, reduce_sum, add, compare (the literal 0 is a leaf)
  EXPECT_TRUE(verify(g).ok());
  EXPECT_EQ(g.find_output("out"), g.eqns[1].out);
  EXPECT_EQ(g.find_output("missing"), -1);
}

::testing::AssertionResult Rejected(const Graph& g) {
  Status s = verify(g);
  if (s.ok()) return ::testing::AssertionFailure() << "verify accepted a corrupted graph";
  return ::testing::AssertionSuccess() << s.take_error().to_string();
}

TEST(Verify, CatchesHandCorruptedGraphs) {
  const Graph base = small_graph();
  ASSERT_TRUE(verify(base).ok());
  {
    Graph g = base;  // declared type no longer what infer derives
    g.values[static_cast<size_t>(g.eqns[1].out)].type.shape = {2, 1};
    EXPECT_TRUE(Rejected(g));
    Status s = verify(g);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
  }
  {
    Graph g = base;
    g.values[static_cast<size_t>(g.eqns[0].out)].type.dtype = DType::kF16;
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // params changed under the eqn
    g.eqns[1].params.keepdim = true;
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // an op whose typing rule refuses the operands
    g.eqns[0].op = OpKind::kMatMul;
    EXPECT_TRUE(Rejected(g));
    Status s = verify(g);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kInvalidInput) << "infer's own error comes through";
  }
  {
    Graph g = base;  // use before definition
    std::swap(g.eqns[0], g.eqns[1]);
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;
    g.eqns[0].in[0] = static_cast<ValueId>(g.values.size());  // out of range
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // an intermediate nobody defines
    g.values.push_back(Value{});
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // two eqns writing one value
    g.eqns.push_back(g.eqns[0]);
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;
    g.outputs.push_back({"bogus", 1000});
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // witness is not pred
    g.validations.push_back({g.eqns[1].out, "not a pred"});
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // donated twice
    g.donations.push_back(g.donations[0]);
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // donation into a non-state value
    g.donations[0].state_in = g.eqns[0].out;
    EXPECT_TRUE(Rejected(g));
  }
  {
    Graph g = base;  // duplicate leaf names
    g.values[static_cast<size_t>(g.donations[0].state_in)].name = "x";
    EXPECT_TRUE(Rejected(g));
  }
}

TEST(Verify, DonationMustKeepTheType) {
  Builder b("g");
  V st = b.state("st", DType::kF32, {2});
  V other = cst(b, "o", {3});
  b.donate(st, other);
  Result<Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.error().message(), HasSubstr("st"));
}

TEST(Verify, WitnessMustBePred) {
  Builder b("g");
  V x = cst(b, "x", {2});
  b.validate(x, "not a pred");
  EXPECT_FALSE(b.finish().ok());
}

// ---------------------------------------------------------------- printer

TEST(Printer, HandWrittenGolden) {
  Builder b("tiny");
  V pos = b.slot(Slot::kPos, DType::kI32, {4});     // %0
  V w = cst(b, "w", {4});                            // %1
  V p = b.cast(pos, DType::kF32);                    // eqn 0 (value 2)
  V half = b.name(p * 0.5, "half");                  // literal (value 3), eqn 1
  V s = b.reduce_sum(half + w, {0});                 // eqns 2, 3: unnamed ones print as %eqn
  b.output("out", s);
  Result<Graph> g = b.finish();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  const std::string want =
      "{ graph tiny ; w:f32[4] ; pos:i32[4] .\n"
      "  %0:f32[4] = cast[dtype=f32] pos\n"
      "  %half:f32[4] = mul %0 0.5:f32\n"
      "  %2:f32[4] = add %half w\n"
      "  %3:f32[] = reduce_sum[axes=(0)] %2\n"
      "  out out = %3\n"
      "}\n";
  EXPECT_EQ(print(*g), want);
  EXPECT_EQ(value_ref(*g, 3), "0.5:f32");
  EXPECT_EQ(value_ref(*g, 1), "w");
  EXPECT_EQ(value_ref(*g, 5), "%2");
}

}  // namespace
}  // namespace kvf::ir
