// Typing rules of every primitive: a valid case per op with its hand-derived result type,
// and the refusals (arity, dtypes, shapes, params), all kInvalidInput naming the op.
#include "ir/infer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace kvf::ir {
namespace {

TensorType f32(Shape s) { return {DType::kF32, std::move(s)}; }
TensorType f16(Shape s) { return {DType::kF16, std::move(s)}; }
TensorType bf16(Shape s) { return {DType::kBF16, std::move(s)}; }
TensorType i32(Shape s) { return {DType::kI32, std::move(s)}; }
TensorType i8(Shape s) { return {DType::kI8, std::move(s)}; }
TensorType pred(Shape s) { return {DType::kBool, std::move(s)}; }
TensorType q8(Shape s) { return {DType::kQ8_0, std::move(s)}; }

::testing::AssertionResult Infers(OpKind op, const Params& p, const std::vector<TensorType>& in,
                                  const TensorType& want) {
  Result<TensorType> t = infer(op, p, in);
  if (!t) return ::testing::AssertionFailure() << op_name(op) << " refused: " << t.take_error().to_string();
  if (*t != want) {
    return ::testing::AssertionFailure() << op_name(op) << " gives " << type_str(*t) << ", want " << type_str(want);
  }
  return ::testing::AssertionSuccess();
}

// Refused with kInvalidInput, and the message names the op it came from.
::testing::AssertionResult Refuses(OpKind op, const Params& p, const std::vector<TensorType>& in) {
  Result<TensorType> t = infer(op, p, in);
  if (t) return ::testing::AssertionFailure() << op_name(op) << " accepted, giving " << type_str(*t);
  Error e = t.take_error();
  if (e.code() != ErrorCode::kInvalidInput) return ::testing::AssertionFailure() << "wrong code: " << e.to_string();
  if (e.message().rfind(std::string(op_name(op)), 0) != 0) {
    return ::testing::AssertionFailure() << "message does not start with the op name: " << e.message();
  }
  return ::testing::AssertionSuccess();
}

Params axes(std::vector<int64_t> a, bool keepdim = false) {
  Params p;
  p.axes = std::move(a);
  p.keepdim = keepdim;
  return p;
}
Params shape_p(Shape s) {
  Params p;
  p.shape = std::move(s);
  return p;
}
Params axis_p(int64_t a) {
  Params p;
  p.axis = a;
  return p;
}
Params dtype_p(DType dt) {
  Params p;
  p.dtype = dt;
  return p;
}
Params cmp_p(CmpDir d) {
  Params p;
  p.cmp = d;
  return p;
}
Params slice_p(std::vector<int64_t> starts, std::vector<int64_t> limits, std::vector<int64_t> steps = {}) {
  Params p;
  p.starts = std::move(starts);
  p.limits = std::move(limits);
  p.steps = std::move(steps);
  return p;
}
Params iota_p(Shape s, int64_t axis, DType dt) {
  Params p;
  p.shape = std::move(s);
  p.axis = axis;
  p.dtype = dt;
  return p;
}

const OpKind kUnary[] = {OpKind::kNeg, OpKind::kExp, OpKind::kLog, OpKind::kSqrt, OpKind::kRsqrt, OpKind::kTanh,
                         OpKind::kErf, OpKind::kAbs, OpKind::kSin, OpKind::kCos, OpKind::kRecip};
const OpKind kArith[] = {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kMax, OpKind::kMin};

// ---------------------------------------------------------------- one valid case per op

struct ValidCase {
  OpKind op;
  Params p;
  std::vector<TensorType> in;
  TensorType want;
};

std::vector<ValidCase> valid_cases() {
  std::vector<ValidCase> c;
  for (OpKind op : kUnary) c.push_back({op, {}, {f32({2, 3})}, f32({2, 3})});
  for (OpKind op : kArith) c.push_back({op, {}, {f32({2, 1, 3}), f32({4, 1})}, f32({2, 4, 3})});
  c.push_back({OpKind::kCompare, cmp_p(CmpDir::kLt), {f32({3}), f32({2, 1})}, pred({2, 3})});
  c.push_back({OpKind::kAnd, {}, {pred({4}), pred({})}, pred({4})});
  c.push_back({OpKind::kOr, {}, {pred({1, 2}), pred({3, 1})}, pred({3, 2})});
  c.push_back({OpKind::kSelect, {}, {pred({2, 1}), f32({1, 3}), f32({2, 3})}, f32({2, 3})});
  c.push_back({OpKind::kReduceSum, axes({1}), {f32({2, 3, 4})}, f32({2, 4})});
  c.push_back({OpKind::kReduceMax, axes({0, 2}, true), {f32({2, 3, 4})}, f32({1, 3, 1})});
  c.push_back({OpKind::kReshape, shape_p({6, 4}), {f32({2, 3, 4})}, f32({6, 4})});
  c.push_back({OpKind::kTranspose, axes({2, 0, 1}), {f32({2, 3, 4})}, f32({4, 2, 3})});
  c.push_back({OpKind::kBroadcast, shape_p({2, 3, 4}), {f32({3, 1})}, f32({2, 3, 4})});
  c.push_back({OpKind::kSlice, slice_p({2, 0}, {8, 6}, {2, 1}), {f32({10, 6})}, f32({3, 6})});
  c.push_back({OpKind::kConcat, axis_p(1), {f32({2, 3}), f32({2, 5}), f32({2, 1})}, f32({2, 9})});
  c.push_back({OpKind::kIota, iota_p({3, 4}, 1, DType::kI32), {}, i32({3, 4})});
  c.push_back({OpKind::kCast, dtype_p(DType::kF16), {f32({2, 3})}, f16({2, 3})});
  c.push_back({OpKind::kGather, {}, {f32({10, 4}), i32({2, 3})}, f32({2, 3, 4})});
  c.push_back({OpKind::kScatterUpdate, {}, {f32({10, 4}), i32({3}), f32({3, 4})}, f32({10, 4})});
  c.push_back({OpKind::kDynamicUpdateSlice, axis_p(1), {f32({2, 8, 4}), f32({2, 3, 4}), i32({1})}, f32({2, 8, 4})});
  c.push_back({OpKind::kMatMul, {}, {f32({3, 4}), f32({4, 5})}, f32({3, 5})});
  c.push_back({OpKind::kAllReduce, {}, {f32({2, 3, 4})}, f32({2, 3, 4})});
  return c;
}

TEST(Infer, ValidCaseForEveryOp) {
  std::set<int> covered;
  for (const ValidCase& c : valid_cases()) {
    EXPECT_TRUE(Infers(c.op, c.p, c.in, c.want));
    covered.insert(static_cast<int>(c.op));
  }
  for (int op = 0; op <= static_cast<int>(OpKind::kAllReduce); ++op) {
    EXPECT_TRUE(covered.count(op)) << "no valid case for " << op_name(static_cast<OpKind>(op));
  }
}

TEST(Infer, WrongArityForEveryOp) {
  for (const ValidCase& c : valid_cases()) {
    if (c.op == OpKind::kConcat) continue;  // variadic: see Concat
    std::vector<TensorType> more = c.in;
    more.push_back(more.empty() ? f32({1}) : more.back());
    EXPECT_TRUE(Refuses(c.op, c.p, more)) << "one extra operand";
    if (!c.in.empty()) {
      std::vector<TensorType> fewer(c.in.begin(), c.in.end() - 1);
      EXPECT_TRUE(Refuses(c.op, c.p, fewer)) << "one operand short";
    }
  }
}

TEST(Infer, NegativeOperandDimForEveryOp) {
  for (const ValidCase& c : valid_cases()) {
    for (size_t k = 0; k < c.in.size(); ++k) {
      std::vector<TensorType> in = c.in;
      in[k].shape.push_back(-1);
      EXPECT_TRUE(Refuses(c.op, c.p, in)) << "operand " << k;
      in[k].shape.back() = -3;
      in[k].shape.insert(in[k].shape.begin(), 1);
      EXPECT_TRUE(Refuses(c.op, c.p, in)) << "operand " << k;
    }
  }
}

// ---------------------------------------------------------------- elementwise

TEST(Infer, UnaryDTypes) {
  for (OpKind op : kUnary) {
    EXPECT_TRUE(Infers(op, {}, {f16({5})}, f16({5})));
    EXPECT_TRUE(Infers(op, {}, {bf16({})}, bf16({})));
    EXPECT_TRUE(Infers(op, {}, {f32({0, 2})}, f32({0, 2})));
    EXPECT_TRUE(Refuses(op, {}, {pred({2})}));
    EXPECT_TRUE(Refuses(op, {}, {q8({32})}));
    EXPECT_TRUE(Refuses(op, {}, {i8({2})}));
    if (op == OpKind::kNeg || op == OpKind::kAbs) {
      EXPECT_TRUE(Infers(op, {}, {i32({3})}, i32({3})));
    } else {
      EXPECT_TRUE(Refuses(op, {}, {i32({3})}));
    }
  }
}

TEST(Infer, ArithmeticBinary) {
  for (OpKind op : kArith) {
    EXPECT_TRUE(Infers(op, {}, {f32({}), f32({2, 3})}, f32({2, 3})));
    EXPECT_TRUE(Infers(op, {}, {i32({4}), i32({4})}, i32({4})));
    EXPECT_TRUE(Infers(op, {}, {f16({0, 3}), f16({1, 3})}, f16({0, 3})));
    EXPECT_TRUE(Refuses(op, {}, {f32({2}), f16({2})}));          // dtype mismatch
    EXPECT_TRUE(Refuses(op, {}, {f32({2, 3}), i32({2, 3})}));
    EXPECT_TRUE(Refuses(op, {}, {f32({2, 3}), f32({4})}));       // not broadcastable
    EXPECT_TRUE(Refuses(op, {}, {f32({2, 3}), f32({3, 2})}));
    EXPECT_TRUE(Refuses(op, {}, {f32({0}), f32({2})}));
    EXPECT_TRUE(Refuses(op, {}, {pred({2}), pred({2})}));        // no arithmetic on pred
    EXPECT_TRUE(Refuses(op, {}, {q8({32}), q8({32})}));          // nor on blocks
  }
}

TEST(Infer, Compare) {
  for (CmpDir d : {CmpDir::kEq, CmpDir::kNe, CmpDir::kLt, CmpDir::kLe, CmpDir::kGt, CmpDir::kGe}) {
    EXPECT_TRUE(Infers(OpKind::kCompare, cmp_p(d), {f32({2, 3}), f32({})}, pred({2, 3})));
    EXPECT_TRUE(Infers(OpKind::kCompare, cmp_p(d), {i32({4}), i32({4})}, pred({4})));
  }
  EXPECT_TRUE(Infers(OpKind::kCompare, cmp_p(CmpDir::kEq), {pred({2}), pred({2})}, pred({2})));
  EXPECT_TRUE(Infers(OpKind::kCompare, cmp_p(CmpDir::kNe), {pred({2}), pred({2})}, pred({2})));
  EXPECT_TRUE(Refuses(OpKind::kCompare, cmp_p(CmpDir::kLt), {pred({2}), pred({2})}));  // preds are unordered
  EXPECT_TRUE(Refuses(OpKind::kCompare, cmp_p(CmpDir::kGe), {pred({2}), pred({2})}));
  EXPECT_TRUE(Refuses(OpKind::kCompare, {}, {f32({2}), i32({2})}));
  EXPECT_TRUE(Refuses(OpKind::kCompare, {}, {f32({2}), f32({3})}));
  EXPECT_TRUE(Refuses(OpKind::kCompare, {}, {q8({32}), q8({32})}));
}

TEST(Infer, AndOr) {
  for (OpKind op : {OpKind::kAnd, OpKind::kOr}) {
    EXPECT_TRUE(Infers(op, {}, {pred({2, 3}), pred({2, 3})}, pred({2, 3})));
    EXPECT_TRUE(Refuses(op, {}, {f32({2}), f32({2})}));
    EXPECT_TRUE(Refuses(op, {}, {i32({2}), i32({2})}));
    EXPECT_TRUE(Refuses(op, {}, {pred({2}), f32({2})}));
    EXPECT_TRUE(Refuses(op, {}, {pred({2}), pred({3})}));
  }
}

TEST(Infer, Select) {
  const OpKind op = OpKind::kSelect;
  EXPECT_TRUE(Infers(op, {}, {pred({}), i32({4}), i32({4})}, i32({4})));
  EXPECT_TRUE(Infers(op, {}, {pred({3, 1, 1}), f16({1, 2}), f16({4, 1})}, f16({3, 4, 2})));
  EXPECT_TRUE(Refuses(op, {}, {f32({4}), f32({4}), f32({4})}));    // predicate not pred
  EXPECT_TRUE(Refuses(op, {}, {i32({4}), f32({4}), f32({4})}));
  EXPECT_TRUE(Refuses(op, {}, {pred({4}), f32({4}), f16({4})}));   // branch dtypes differ
  EXPECT_TRUE(Refuses(op, {}, {pred({3}), f32({4}), f32({4})}));   // pred vs branch shape
  EXPECT_TRUE(Refuses(op, {}, {pred({4}), f32({4}), f32({2, 3})}));
}

// ---------------------------------------------------------------- reductions

TEST(Infer, Reduce) {
  for (OpKind op : {OpKind::kReduceSum, OpKind::kReduceMax}) {
    const TensorType x = f32({2, 3, 4});
    EXPECT_TRUE(Infers(op, axes({1}), {x}, f32({2, 4})));
    EXPECT_TRUE(Infers(op, axes({1}, true), {x}, f32({2, 1, 4})));
    EXPECT_TRUE(Infers(op, axes({2, 0}), {x}, f32({3})));
    EXPECT_TRUE(Infers(op, axes({0, 1, 2}), {x}, f32({})));
    EXPECT_TRUE(Infers(op, axes({0, 1, 2}, true), {x}, f32({1, 1, 1})));
    EXPECT_TRUE(Infers(op, axes({0}), {i32({5, 2})}, i32({2})));
    EXPECT_TRUE(Infers(op, axes({0}), {bf16({0, 2})}, bf16({2})));
    EXPECT_TRUE(Refuses(op, axes({3}), {x}));         // out of range
    EXPECT_TRUE(Refuses(op, axes({-1}), {x}));        // must be normalized already
    EXPECT_TRUE(Refuses(op, axes({1, 1}), {x}));      // named twice
    EXPECT_TRUE(Refuses(op, axes({0, 2, 0}), {x}));
    EXPECT_TRUE(Refuses(op, axes({}), {x}));          // nothing to reduce
    EXPECT_TRUE(Refuses(op, axes({0}), {f32({})}));   // rank 0 has no axes
    EXPECT_TRUE(Refuses(op, axes({0}), {pred({2})}));
    EXPECT_TRUE(Refuses(op, axes({0}), {i8({2})}));
    EXPECT_TRUE(Refuses(op, axes({0}), {q8({32})}));
  }
}

// ---------------------------------------------------------------- layout

TEST(Infer, Reshape) {
  const OpKind op = OpKind::kReshape;
  EXPECT_TRUE(Infers(op, shape_p({24}), {f32({2, 3, 4})}, f32({24})));
  EXPECT_TRUE(Infers(op, shape_p({1, 1}), {i32({})}, i32({1, 1})));
  EXPECT_TRUE(Infers(op, shape_p({}), {f32({1, 1, 1})}, f32({})));
  EXPECT_TRUE(Infers(op, shape_p({3, 0}), {f32({0, 5})}, f32({3, 0})));
  EXPECT_TRUE(Refuses(op, shape_p({5, 5}), {f32({2, 3, 4})}));   // 25 != 24
  EXPECT_TRUE(Refuses(op, shape_p({}), {f32({2})}));
  EXPECT_TRUE(Refuses(op, shape_p({-1, 4}), {f32({2, 3, 4})}));  // -1 is the builder's job
  EXPECT_TRUE(Refuses(op, shape_p({-2, -12}), {f32({2, 3, 4})}));
}

// The tables' rows index x's axis -2, or with token_axis -3 the axis before the heads.
TEST(Infer, RopeTokenAxis) {
  const OpKind op = OpKind::kRope;
  Params p;
  p.rope.rotary_dim = 8;
  EXPECT_TRUE(Infers(op, p, {f32({1, 4, 6, 8}), f32({6, 4}), f32({6, 4})}, f32({1, 4, 6, 8})));
  EXPECT_TRUE(Refuses(op, p, {f32({1, 6, 4, 8}), f32({6, 4}), f32({6, 4})}));  // T is axis -2: 4 rows
  p.rope.token_axis = -3;
  EXPECT_TRUE(Infers(op, p, {f32({1, 6, 4, 8}), f32({6, 4}), f32({6, 4})}, f32({1, 6, 4, 8})));
  EXPECT_TRUE(Infers(op, p, {f32({6, 4, 8}), f32({6, 4}), f32({6, 4})}, f32({6, 4, 8})));
  EXPECT_TRUE(Refuses(op, p, {f32({4, 8}), f32({4, 4}), f32({4, 4})}));  // rank 2 has no axis -3
  EXPECT_TRUE(Refuses(op, p, {f32({1, 4, 6, 8}), f32({6, 4}), f32({6, 4})}));
  p.rope.token_axis = -1;
  EXPECT_TRUE(Refuses(op, p, {f32({1, 4, 6, 8}), f32({8, 4}), f32({8, 4})}));
  EXPECT_EQ(ir::rope_positions(p.rope, {1, 6, 4, 8}).every, 1);
  p.rope.token_axis = -3;
  const ir::RopePositions at = ir::rope_positions(p.rope, {1, 6, 4, 8});
  EXPECT_EQ(at.t_len, 6);
  EXPECT_EQ(at.every, 4);
}

TEST(Infer, Transpose) {
  const OpKind op = OpKind::kTranspose;
  EXPECT_TRUE(Infers(op, axes({1, 0}), {i32({5, 7})}, i32({7, 5})));
  EXPECT_TRUE(Infers(op, axes({0, 1, 2}), {f32({2, 3, 4})}, f32({2, 3, 4})));
  EXPECT_TRUE(Infers(op, axes({}), {f32({})}, f32({})));
  EXPECT_TRUE(Refuses(op, axes({0, 1}), {f32({2, 3, 4})}));      // too short
  EXPECT_TRUE(Refuses(op, axes({0, 1, 2, 3}), {f32({2, 3, 4})}));
  EXPECT_TRUE(Refuses(op, axes({0, 0, 1}), {f32({2, 3, 4})}));   // repeated
  EXPECT_TRUE(Refuses(op, axes({0, 1, 3}), {f32({2, 3, 4})}));   // out of range
  EXPECT_TRUE(Refuses(op, axes({-1, 0, 1}), {f32({2, 3, 4})}));
}

TEST(Infer, Broadcast) {
  const OpKind op = OpKind::kBroadcast;
  EXPECT_TRUE(Infers(op, shape_p({5}), {f32({})}, f32({5})));
  EXPECT_TRUE(Infers(op, shape_p({2, 3}), {f32({2, 3})}, f32({2, 3})));
  EXPECT_TRUE(Infers(op, shape_p({4, 0}), {f32({1})}, f32({4, 0})));
  EXPECT_TRUE(Refuses(op, shape_p({2}), {f32({3})}));            // 3 -> 2
  EXPECT_TRUE(Refuses(op, shape_p({3, 2}), {f32({3})}));         // trailing axes align: 3 vs 2
  EXPECT_TRUE(Refuses(op, shape_p({3}), {f32({2, 3})}));         // fewer axes
  EXPECT_TRUE(Refuses(op, shape_p({5}), {f32({0})}));            // 0 does not stretch
  EXPECT_TRUE(Refuses(op, shape_p({-1, 3}), {f32({3})}));        // negative target dim
  EXPECT_TRUE(Refuses(op, shape_p({}), {f32({1})}));
}

TEST(Infer, Slice) {
  const OpKind op = OpKind::kSlice;
  const TensorType x = f32({10, 6});
  EXPECT_TRUE(Infers(op, slice_p({1, 2}, {4, 6}), {x}, f32({3, 4})));               // steps default to 1
  EXPECT_TRUE(Infers(op, slice_p({0, 0}, {10, 6}, {3, 4}), {x}, f32({4, 2})));       // ceil(10/3), ceil(6/4)
  EXPECT_TRUE(Infers(op, slice_p({5, 6}, {5, 6}), {x}, f32({0, 0})));                // empty is fine
  EXPECT_TRUE(Infers(op, slice_p({}, {}), {f32({})}, f32({})));
  EXPECT_TRUE(Refuses(op, slice_p({0, 0}, {11, 6}), {x}));          // limit past the end
  EXPECT_TRUE(Refuses(op, slice_p({-1, 0}, {3, 6}), {x}));          // negative start
  EXPECT_TRUE(Refuses(op, slice_p({4, 0}, {3, 6}), {x}));           // start > limit
  EXPECT_TRUE(Refuses(op, slice_p({0, 0}, {10, 6}, {0, 1}), {x}));  // step 0
  EXPECT_TRUE(Refuses(op, slice_p({0, 0}, {10, 6}, {1, -1}), {x})); // negative step
  EXPECT_TRUE(Refuses(op, slice_p({0}, {10}), {x}));                // one entry per axis
  EXPECT_TRUE(Refuses(op, slice_p({0, 0}, {10}), {x}));
  EXPECT_TRUE(Refuses(op, slice_p({0, 0}, {10, 6}, {1}), {x}));
}

TEST(Infer, Concat) {
  const OpKind op = OpKind::kConcat;
  EXPECT_TRUE(Infers(op, axis_p(0), {f32({2, 3})}, f32({2, 3})));                  // one operand
  EXPECT_TRUE(Infers(op, axis_p(0), {i32({1, 3}), i32({0, 3}), i32({4, 3})}, i32({5, 3})));
  EXPECT_TRUE(Refuses(op, axis_p(0), {}));                                          // none
  EXPECT_TRUE(Refuses(op, axis_p(1), {f32({2, 3}), f32({3, 3})}));                 // off-axis dims
  EXPECT_TRUE(Refuses(op, axis_p(0), {f32({2, 3}), f32({2, 4})}));
  EXPECT_TRUE(Refuses(op, axis_p(0), {f32({2, 3}), f32({2, 3, 1})}));              // rank
  EXPECT_TRUE(Refuses(op, axis_p(0), {f32({2, 3}), f16({2, 3})}));                 // dtype
  EXPECT_TRUE(Refuses(op, axis_p(2), {f32({2, 3}), f32({2, 3})}));                 // axis range
  EXPECT_TRUE(Refuses(op, axis_p(-1), {f32({2, 3}), f32({2, 3})}));
  EXPECT_TRUE(Refuses(op, axis_p(0), {f32({}), f32({})}));                         // rank 0
}

TEST(Infer, Iota) {
  const OpKind op = OpKind::kIota;
  EXPECT_TRUE(Infers(op, iota_p({5}, 0, DType::kF32), {}, f32({5})));
  EXPECT_TRUE(Infers(op, iota_p({2, 0}, 0, DType::kBF16), {}, bf16({2, 0})));
  EXPECT_TRUE(Refuses(op, iota_p({3, 4}, 2, DType::kI32), {}));      // axis out of range
  EXPECT_TRUE(Refuses(op, iota_p({3, 4}, -1, DType::kI32), {}));
  EXPECT_TRUE(Refuses(op, iota_p({}, 0, DType::kI32), {}));          // rank 0 has no axis
  EXPECT_TRUE(Refuses(op, iota_p({3, -4}, 0, DType::kI32), {}));     // negative dim
  EXPECT_TRUE(Refuses(op, iota_p({3}, 0, DType::kBool), {}));
  EXPECT_TRUE(Refuses(op, iota_p({32}, 0, DType::kQ8_0), {}));
  EXPECT_TRUE(Refuses(op, iota_p({3}, 0, DType::kI8), {}));
  EXPECT_TRUE(Refuses(op, iota_p({3}, 0, DType::kI32), {i32({3})}));  // no operands
}

TEST(Infer, Cast) {
  const OpKind op = OpKind::kCast;
  EXPECT_TRUE(Infers(op, dtype_p(DType::kI32), {f32({2, 3})}, i32({2, 3})));
  EXPECT_TRUE(Infers(op, dtype_p(DType::kF32), {pred({4})}, f32({4})));
  EXPECT_TRUE(Infers(op, dtype_p(DType::kBF16), {f16({})}, bf16({})));
  EXPECT_TRUE(Infers(op, dtype_p(DType::kF32), {f32({7})}, f32({7})));
  EXPECT_TRUE(Refuses(op, dtype_p(DType::kQ8_0), {f32({32})}));   // to blocks
  EXPECT_TRUE(Refuses(op, dtype_p(DType::kQ4_0), {f32({32})}));
  // Casting a block-quantized weight to a float dtype is the IR's "dequantize".
  EXPECT_TRUE(Infers(op, dtype_p(DType::kF32), {q8({2, 32})}, f32({2, 32})));
  EXPECT_TRUE(Infers(op, dtype_p(DType::kBF16), {TensorType{DType::kQ4_0, {32}}}, bf16({32})));
  EXPECT_TRUE(Refuses(op, dtype_p(DType::kI32), {q8({32})}));     // blocks only to floats
  EXPECT_TRUE(Refuses(op, dtype_p(DType::kQ4_0), {q8({32})}));
}

// ---------------------------------------------------------------- indexing

TEST(Infer, Gather) {
  const OpKind op = OpKind::kGather;
  EXPECT_TRUE(Infers(op, {}, {f16({100, 8}), i32({})}, f16({8})));
  EXPECT_TRUE(Infers(op, {}, {f32({10}), i32({4})}, f32({4})));
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), f32({3})}));   // indices not i32
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i8({3})}));
  EXPECT_TRUE(Refuses(op, {}, {f32({}), i32({3})}));        // table rank 0
  EXPECT_TRUE(Refuses(op, {}, {q8({10, 32}), i32({3})}));   // blocks must be cast first
}

TEST(Infer, ScatterUpdate) {
  const OpKind op = OpKind::kScatterUpdate;
  EXPECT_TRUE(Infers(op, {}, {i32({6}), i32({2}), i32({2})}, i32({6})));
  EXPECT_TRUE(Infers(op, {}, {f32({6, 2, 3}), i32({0}), f32({0, 2, 3})}, f32({6, 2, 3})));
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i32({3}), f32({3, 5})}));   // row shape
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i32({3}), f32({2, 4})}));   // count vs indices
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i32({3}), f32({4})}));
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i32({3}), f16({3, 4})}));   // dtype
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), i32({3, 1}), f32({3, 4})}));  // indices rank
  EXPECT_TRUE(Refuses(op, {}, {f32({10, 4}), f32({3}), f32({3, 4})}));   // indices dtype
  EXPECT_TRUE(Refuses(op, {}, {f32({}), i32({1}), f32({1})}));           // base rank 0
}

TEST(Infer, DynamicUpdateSlice) {
  const OpKind op = OpKind::kDynamicUpdateSlice;
  const TensorType base = f32({2, 8, 4});
  EXPECT_TRUE(Infers(op, axis_p(1), {base, f32({2, 8, 4}), i32({1})}, base));  // whole axis
  EXPECT_TRUE(Infers(op, axis_p(0), {base, f32({1, 8, 4}), i32({1})}, base));
  EXPECT_TRUE(Infers(op, axis_p(2), {base, f32({2, 8, 0}), i32({1})}, base));  // empty update
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({2, 9, 4}), i32({1})}));   // larger than base
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({1, 3, 4}), i32({1})}));   // off-axis dim differs
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({3, 4}), i32({1})}));      // rank differs
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f16({2, 3, 4}), i32({1})}));   // dtype differs
  EXPECT_TRUE(Refuses(op, axis_p(3), {base, f32({2, 3, 4}), i32({1})}));   // axis range
  EXPECT_TRUE(Refuses(op, axis_p(-1), {base, f32({2, 3, 4}), i32({1})}));
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({2, 3, 4}), i32({2})}));   // start not single
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({2, 3, 4}), i32({0})}));
  EXPECT_TRUE(Refuses(op, axis_p(1), {base, f32({2, 3, 4}), f32({1})}));   // start not i32
}

TEST(Infer, MatMul) {
  const OpKind op = OpKind::kMatMul;
  EXPECT_TRUE(Infers(op, {}, {f32({2, 1, 3, 4}), f32({5, 4, 6})}, f32({2, 5, 3, 6})));
  EXPECT_TRUE(Infers(op, {}, {f32({7, 3, 4}), f32({4, 2})}, f32({7, 3, 2})));
  EXPECT_TRUE(Infers(op, {}, {bf16({1, 0}), bf16({0, 5})}, bf16({1, 5})));   // K = 0
  EXPECT_TRUE(Infers(op, {}, {f16({4, 3, 2}), f16({1, 2, 3})}, f16({4, 3, 3})));
  EXPECT_TRUE(Refuses(op, {}, {f32({3, 4}), f32({5, 6})}));       // contracting 4 vs 5
  EXPECT_TRUE(Refuses(op, {}, {f32({3, 4}), f32({6, 4})}));
  EXPECT_TRUE(Refuses(op, {}, {f32({4}), f32({4, 5})}));          // rank < 2
  EXPECT_TRUE(Refuses(op, {}, {f32({3, 4}), f32({4})}));
  EXPECT_TRUE(Refuses(op, {}, {f32({}), f32({})}));
  EXPECT_TRUE(Refuses(op, {}, {f32({2, 3, 4}), f32({3, 4, 5})})); // batch 2 vs 3
  EXPECT_TRUE(Refuses(op, {}, {f32({3, 4}), f16({4, 5})}));       // dtypes differ
  EXPECT_TRUE(Refuses(op, {}, {i32({3, 4}), i32({4, 5})}));       // not float
  EXPECT_TRUE(Refuses(op, {}, {q8({3, 32}), q8({32, 32})}));
}

// ---------------------------------------------------------------- broadcast_shapes

TEST(BroadcastShapes, NumpyRules) {
  struct Case { Shape a, b, want; };
  const Case ok[] = {
      {{}, {}, {}},
      {{}, {2, 3}, {2, 3}},
      {{2, 3}, {}, {2, 3}},
      {{3}, {2, 1}, {2, 3}},
      {{5, 1, 4}, {3, 1}, {5, 3, 4}},
      {{1}, {1}, {1}},
      {{0}, {1}, {0}},
      {{1}, {0}, {0}},
      {{0}, {0}, {0}},
      {{2, 0}, {1, 1}, {2, 0}},
      {{8, 1, 6, 1}, {7, 1, 5}, {8, 7, 6, 5}},
  };
  for (const Case& c : ok) {
    Result<Shape> s = broadcast_shapes(c.a, c.b);
    ASSERT_TRUE(s.ok()) << shape_str(c.a) << " " << shape_str(c.b) << ": " << s.error().to_string();
    EXPECT_EQ(*s, c.want) << shape_str(c.a) << " " << shape_str(c.b);
  }
  const std::pair<Shape, Shape> bad[] = {
      {{0}, {2}}, {{2}, {0}}, {{3}, {4}}, {{2, 3}, {3, 2}}, {{2, 1}, {8, 4, 3}}, {{-1}, {1}}, {{2}, {1, -2}},
  };
  for (const auto& [a, b] : bad) {
    Result<Shape> s = broadcast_shapes(a, b);
    ASSERT_FALSE(s.ok()) << shape_str(a) << " " << shape_str(b);
    EXPECT_EQ(s.error().code(), ErrorCode::kInvalidInput);
  }
}

// ---------------------------------------------------------------- fused attention, paged keys

Params attn_p(int64_t n_rep, bool mask, bool len, bool read, bool shared = false) {
  Params p;
  p.attn.scale = 0.5;
  p.attn.n_rep = n_rep;
  p.attn.has_mask = mask;
  p.attn.has_len = len;
  p.attn.has_read = read;
  p.attn.has_shared = shared;
  return p;
}

// q [B, Hq, Lq, Dk], the pools k [S, Hkv, Dk] and v [S, Hkv, Dv], then mask, len and the
// read map [B, Lk] last: Lk comes from the map, the widths from the pools.
TEST(Infer, AllReduce) {
  const OpKind op = OpKind::kAllReduce;
  EXPECT_TRUE(Infers(op, {}, {f32({})}, f32({})));
  EXPECT_TRUE(Infers(op, {}, {f32({1, 0, 7})}, f32({1, 0, 7})));
  EXPECT_TRUE(Refuses(op, {}, {f16({4})}));  // the sum is of f32 values only
  EXPECT_TRUE(Refuses(op, {}, {i32({4})}));
  EXPECT_TRUE(Refuses(op, {}, {q8({32})}));
}

TEST(Infer, AttentionPagedKeys) {
  const TensorType q = f32({3, 8, 2, 16}), kp = f32({64, 2, 16}), vp = f32({64, 2, 12});
  const TensorType mask = f32({3, 1, 2, 40}), len = i32({3}), read = i32({3, 40});
  EXPECT_TRUE(Infers(OpKind::kAttention, attn_p(4, true, true, true), {q, kp, vp, mask, len, read}, f32({3, 8, 2, 12})));
  EXPECT_TRUE(Infers(OpKind::kAttention, attn_p(4, false, false, true), {q, kp, vp, read}, f32({3, 8, 2, 12})));
  EXPECT_TRUE(Infers(OpKind::kAttention, attn_p(4, false, false, true), {q, f16({64, 2, 16}), f16({64, 2, 12}), read},
                     f32({3, 8, 2, 12})));
  // The dense form of the same keys, for contrast.
  EXPECT_TRUE(Infers(OpKind::kAttention, attn_p(4, true, true, false),
                     {q, f32({3, 2, 40, 16}), f32({3, 2, 40, 12}), mask, len}, f32({3, 8, 2, 12})));

  const Params paged = attn_p(4, true, true, true);
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, mask, len}));                       // no read map
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, mask, read, len}));                 // read not last
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, f32({3, 2, 40, 16}), f32({3, 2, 40, 12}), mask, len, read}));  // dense k, v
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, f32({48, 2, 12}), mask, len, read}));   // pools of other sizes
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, f32({64, 1, 12}), mask, len, read}));   // other heads
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, f16({64, 2, 12}), mask, len, read}));   // mixed dtypes
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, mask, len, f32({3, 40})}));          // read not i32
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, mask, len, i32({2, 40})}));          // read of 2 rows
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, mask, len, i32({120})}));           // read not [B, Lk]
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, kp, vp, f32({3, 1, 2, 41}), len, read}));  // mask of another Lk
  EXPECT_TRUE(Refuses(OpKind::kAttention, paged, {q, f32({64, 2, 8}), vp, mask, len, read}));    // key width
  EXPECT_TRUE(Refuses(OpKind::kAttention, attn_p(2, true, true, true), {q, kp, vp, mask, len, read}));  // n_rep
  // A paged split key (MLA's latent pools): k_shared is a one-head pool [S, 1, s] read
  // through the same map; a dense k_shared, another pool size or head count is refused.
  const Params split = attn_p(4, false, false, true, true);
  EXPECT_TRUE(Infers(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f32({64, 1, 4}), read}, f32({3, 8, 2, 12})));
  EXPECT_TRUE(Infers(OpKind::kAttention, split, {q, f16({64, 2, 12}), f16({64, 2, 12}), f16({64, 1, 4}), read},
                     f32({3, 8, 2, 12})));
  EXPECT_TRUE(Refuses(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f32({3, 1, 40, 4}), read}));  // dense
  EXPECT_TRUE(Refuses(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f32({48, 1, 4}), read}));     // pool size
  EXPECT_TRUE(Refuses(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f32({64, 2, 4}), read}));     // two heads
  EXPECT_TRUE(Refuses(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f16({64, 1, 4}), read}));     // dtype
  EXPECT_TRUE(Refuses(OpKind::kAttention, split, {q, f32({64, 2, 12}), vp, f32({64, 1, 5}), read}));     // width
}

// ---------------------------------------------------------------- fused lora

// x [6, 8] through rank 2 into y [6, 5] over 3 stack entries: stacks f32 or f16 (both the
// same), s and x f32, ids one per row.
TEST(Infer, LoraStacks) {
  auto in = [](DType stacks, Shape ids) {
    return std::vector<TensorType>{f32({6, 8}), f32({6, 5}), {stacks, {3, 16}}, {stacks, {3, 10}}, f32({3, 1}), i32(std::move(ids))};
  };
  EXPECT_TRUE(Infers(OpKind::kLora, {}, in(DType::kF32, {6}), f32({6, 5})));
  EXPECT_TRUE(Infers(OpKind::kLora, {}, in(DType::kF16, {6}), f32({6, 5})));
  EXPECT_TRUE(Refuses(OpKind::kLora, {}, in(DType::kBF16, {6})));
  EXPECT_TRUE(Refuses(OpKind::kLora, {}, in(DType::kF32, {5})));  // ids for another row count
  std::vector<TensorType> mixed = in(DType::kF32, {6});
  mixed[3].dtype = DType::kF16;
  EXPECT_TRUE(Refuses(OpKind::kLora, {}, mixed));
  std::vector<TensorType> other_rank = in(DType::kF16, {6});
  other_rank[3].shape = {3, 15};  // b of rank 3 beside a of rank 2
  EXPECT_TRUE(Refuses(OpKind::kLora, {}, other_rank));
}

// ---------------------------------------------------------------- op metadata

TEST(OpKind, NamesAndClasses) {
  std::set<std::string_view> names;
  int unary = 0, binary = 0, reduce = 0;
  for (int i = 0; i <= static_cast<int>(OpKind::kAllReduce); ++i) {
    const OpKind op = static_cast<OpKind>(i);
    EXPECT_NE(op_name(op), "?");
    EXPECT_TRUE(names.insert(op_name(op)).second) << op_name(op) << " named twice";
    unary += is_unary(op);
    binary += is_binary(op);
    reduce += is_reduce(op);
  }
  EXPECT_EQ(unary, 11);
  EXPECT_EQ(binary, 9);  // add sub mul div max min compare and or
  EXPECT_EQ(reduce, 2);
  EXPECT_TRUE(is_binary(OpKind::kCompare));
  EXPECT_FALSE(is_binary(OpKind::kSelect));
  EXPECT_EQ(op_name(OpKind::kDynamicUpdateSlice), "dynamic_update_slice");
  EXPECT_EQ(op_name(OpKind::kAllReduce), "all_reduce");
  EXPECT_TRUE(is_collective(OpKind::kAllReduce));
  EXPECT_FALSE(is_fused(OpKind::kAllReduce));
  EXPECT_FALSE(is_collective(OpKind::kMatMul));
  EXPECT_EQ(cmp_name(CmpDir::kLe), "le");
  EXPECT_EQ(cmp_name(CmpDir::kNe), "ne");
}

}  // namespace
}  // namespace kvf::ir
