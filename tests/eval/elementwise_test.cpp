// Oracle semantics of the elementwise primitives: unary math, broadcasting binaries,
// compare/and/or, select, cast, iota, and native-vs-f64 rounding. Every expected value is
// hand-derived (or computed by a direct loop below), never read back from the oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "eval/buffers.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::f32;
using testing::i32;
using testing::make;

using eval::Buffer;
using eval::Precision;
using ir::Builder;
using ir::CmpDir;
using ir::OpKind;
using testing::expect_buf;
using testing::input;
using testing::run_expr;
using testing::run_expr_error;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kI32Min = -2147483648.0;
constexpr double kI32Max = 2147483647.0;

Buffer pred(Shape s, std::vector<double> v) { return make(DType::kBool, std::move(s), std::move(v)); }

Buffer unary(OpKind op, const Buffer& x, Precision p = Precision::kF64) {
  return run_expr([&](Builder& b) { return b.unary(op, input(b, "x", x)); }, p);
}
Buffer binary(OpKind op, const Buffer& x, const Buffer& y) {
  return run_expr([&](Builder& b) { return b.binary(op, input(b, "x", x), input(b, "y", y)); });
}
Buffer cmp(CmpDir dir, const Buffer& x, const Buffer& y) {
  return run_expr([&](Builder& b) { return b.compare(input(b, "x", x), input(b, "y", y), dir); });
}

// ---------------------------------------------------------------- unary (f32)

TEST(Neg, F32) {
  Buffer out = unary(OpKind::kNeg, f32({4}, {1.5, -2, 0, kInf}));
  expect_buf(out, DType::kF32, {4}, {-1.5, 2, 0, -kInf});
  ASSERT_EQ(out.data.size(), 4u);
  EXPECT_TRUE(std::signbit(out.data[2])) << "-(+0) is -0";
}

TEST(Exp, KnownValues) {
  expect_buf(unary(OpKind::kExp, f32({5}, {0, 1, -kInf, kInf, -1})), DType::kF32, {5},
             {1, 2.718281828459045, 0, kInf, 0.36787944117144233}, 1e-15);
}

TEST(Log, KnownValues) {
  expect_buf(unary(OpKind::kLog, f32({5}, {1, 0, -1, kInf, 8})), DType::kF32, {5},
             {0, -kInf, kNaN, kInf, 2.0794415416798357}, 1e-15);
}

TEST(Sqrt, KnownValues) {
  expect_buf(unary(OpKind::kSqrt, f32({5}, {4, 0, 2.25, -1, kInf})), DType::kF32, {5}, {2, 0, 1.5, kNaN, kInf});
}

TEST(Rsqrt, KnownValues) {
  expect_buf(unary(OpKind::kRsqrt, f32({5}, {4, 0.25, 0, kInf, 16})), DType::kF32, {5}, {0.5, 2, kInf, 0, 0.25});
}

TEST(Tanh, KnownValues) {
  expect_buf(unary(OpKind::kTanh, f32({4}, {0, kInf, -kInf, 0.5})), DType::kF32, {4},
             {0, 1, -1, 0.46211715726000974}, 1e-15);
}

TEST(Erf, KnownValues) {
  expect_buf(unary(OpKind::kErf, f32({5}, {0, kInf, -kInf, 1, -1})), DType::kF32, {5},
             {0, 1, -1, 0.8427007929497149, -0.8427007929497149}, 1e-15);
}

TEST(Abs, F32) {
  Buffer out = unary(OpKind::kAbs, f32({4}, {-3, 2.5, -0.0, -kInf}));
  expect_buf(out, DType::kF32, {4}, {3, 2.5, 0, kInf});
  ASSERT_EQ(out.data.size(), 4u);
  EXPECT_FALSE(std::signbit(out.data[2])) << "|-0| is +0";
}

TEST(Sin, KnownValues) {
  // float(pi/2) = 1.5707963705...: sin is 1 to ~1e-15.
  expect_buf(unary(OpKind::kSin, f32({4}, {0, 1.5707963267948966, -1.5707963267948966, 0.5})), DType::kF32, {4},
             {0, 1, -1, 0.479425538604203}, 1e-12);
}

TEST(Cos, KnownValues) {
  expect_buf(unary(OpKind::kCos, f32({3}, {0, 3.141592653589793, 0.5})), DType::kF32, {3},
             {1, -1, 0.8775825618903728}, 1e-12);
}

TEST(Recip, KnownValues) {
  Buffer out = unary(OpKind::kRecip, f32({5}, {4, -0.5, 0, -0.0, kInf}));
  expect_buf(out, DType::kF32, {5}, {0.25, -2, kInf, -kInf, 0});
}

TEST(Exp, NativeRoundsToF32) {
  // e rounded to the nearest float.
  expect_buf(unary(OpKind::kExp, f32({1}, {1}), Precision::kNative), DType::kF32, {1},
             {static_cast<double>(static_cast<float>(2.718281828459045))});
}

// ---------------------------------------------------------------- unary (i32)

TEST(Neg, I32WrapsAtMin) {
  expect_buf(unary(OpKind::kNeg, i32({5}, {5, -7, 0, kI32Min, kI32Max})), DType::kI32, {5},
             {-5, 7, 0, kI32Min, -kI32Max});
}

TEST(Abs, I32WrapsAtMin) {
  expect_buf(unary(OpKind::kAbs, i32({5}, {5, -7, 0, kI32Min, kI32Max})), DType::kI32, {5},
             {5, 7, 0, kI32Min, kI32Max});
}

// ---------------------------------------------------------------- binary arithmetic

TEST(Add, F32) {
  expect_buf(binary(OpKind::kAdd, f32({4}, {1, -2, 3.5, 0}), f32({4}, {2, 4, -0.5, 8})), DType::kF32, {4},
             {3, 2, 3, 8});
}

TEST(Sub, F32) {
  expect_buf(binary(OpKind::kSub, f32({4}, {1, -2, 3.5, 0}), f32({4}, {2, 4, -0.5, 8})), DType::kF32, {4},
             {-1, -6, 4, -8});
}

TEST(Mul, F32) {
  expect_buf(binary(OpKind::kMul, f32({4}, {1, -2, 3.5, 0}), f32({4}, {2, 4, -0.5, 8})), DType::kF32, {4},
             {2, -8, -1.75, 0});
}

TEST(Div, F32IncludingByZero) {
  expect_buf(binary(OpKind::kDiv, f32({6}, {1, -2, 3.5, 1, -1, 0}), f32({6}, {2, 4, -0.5, 0, 0, 0})), DType::kF32, {6},
             {0.5, -0.5, -7, kInf, -kInf, kNaN});
}

TEST(Max, F32) {
  expect_buf(binary(OpKind::kMax, f32({4}, {1, -2, 3.5, -kInf}), f32({4}, {2, 4, -0.5, 3})), DType::kF32, {4},
             {2, 4, 3.5, 3});
}

TEST(Min, F32) {
  expect_buf(binary(OpKind::kMin, f32({4}, {1, -2, 3.5, kInf}), f32({4}, {2, 4, -0.5, 3})), DType::kF32, {4},
             {1, -2, -0.5, 3});
}

TEST(Max, PropagatesNaNFromEitherSide) {
  expect_buf(binary(OpKind::kMax, f32({3}, {kNaN, 1, kNaN}), f32({3}, {1, kNaN, kNaN})), DType::kF32, {3},
             {kNaN, kNaN, kNaN});
}

TEST(Min, PropagatesNaNFromEitherSide) {
  expect_buf(binary(OpKind::kMin, f32({3}, {kNaN, 1, kNaN}), f32({3}, {1, kNaN, kNaN})), DType::kF32, {3},
             {kNaN, kNaN, kNaN});
}

TEST(Add, I32Wraparound) {
  expect_buf(binary(OpKind::kAdd, i32({3}, {kI32Max, kI32Min, 5}), i32({3}, {1, -1, -7})), DType::kI32, {3},
             {kI32Min, kI32Max, -2});
}

TEST(Sub, I32Wraparound) {
  expect_buf(binary(OpKind::kSub, i32({3}, {kI32Min, kI32Max, 3}), i32({3}, {1, -1, 10})), DType::kI32, {3},
             {kI32Max, kI32Min, -7});
}

TEST(Mul, I32Wraparound) {
  // 65536^2 = 2^32 wraps to 0; 65537^2 = 2^32 + 2^17 + 1 wraps to 131073; 2^30 * 2 = 2^31 wraps to -2^31.
  expect_buf(binary(OpKind::kMul, i32({4}, {65536, 65537, 1073741824, -6}), i32({4}, {65536, 65537, 2, 7})),
             DType::kI32, {4}, {0, 131073, kI32Min, -42});
}

TEST(Add, I8Wraparound) {
  // i8 arithmetic wraps at 8 bits: 100 + 100 = 200 - 256 = -56, -128 + -1 = 127
  const Buffer x = make(DType::kI8, {3}, {100, -128, 5});
  const Buffer y = make(DType::kI8, {3}, {100, -1, -7});
  expect_buf(binary(OpKind::kAdd, x, y), DType::kI8, {3}, {-56, 127, -2});
  // -128 / -1 = 128 wraps to -128; 16 * 8 = 128 wraps to -128
  expect_buf(binary(OpKind::kDiv, make(DType::kI8, {2}, {-128, 7}), make(DType::kI8, {2}, {-1, -2})), DType::kI8, {2},
             {-128, -3});
  expect_buf(binary(OpKind::kMul, make(DType::kI8, {1}, {16}), make(DType::kI8, {1}, {8})), DType::kI8, {1}, {-128});
}

TEST(Div, I32TruncatesTowardZero) {
  // INT32_MIN / -1 = 2^31 wraps back to INT32_MIN.
  expect_buf(binary(OpKind::kDiv, i32({6}, {7, -7, 7, -7, 0, kI32Min}), i32({6}, {2, 2, -2, -2, 3, -1})), DType::kI32,
             {6}, {3, -3, -3, 3, 0, kI32Min});
}

TEST(Div, I32ByZeroIsInvalidInput) {
  Error e = run_expr_error([&](Builder& b) { return b.binary(OpKind::kDiv, input(b, "x", i32({2}, {4, 5})), input(b, "y", i32({2}, {2, 0}))); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.to_string();
  EXPECT_NE(e.message().find("division by zero"), std::string::npos) << e.message();
}

TEST(Max, I32) {
  expect_buf(binary(OpKind::kMax, i32({3}, {3, -5, kI32Min}), i32({3}, {-1, 2, kI32Max})), DType::kI32, {3},
             {3, 2, kI32Max});
}

TEST(Min, I32) {
  expect_buf(binary(OpKind::kMin, i32({3}, {3, -5, kI32Min}), i32({3}, {-1, 2, kI32Max})), DType::kI32, {3},
             {-1, -5, kI32Min});
}

// ---------------------------------------------------------------- compare, and, or

TEST(Compare, AllDirectionsWithNaN) {
  // Pairs: 1<2, 2==2, 3>2, NaN vs 1, NaN vs NaN, -inf < inf.
  const Buffer x = f32({6}, {1, 2, 3, kNaN, kNaN, -kInf});
  const Buffer y = f32({6}, {2, 2, 2, 1, kNaN, kInf});
  expect_buf(cmp(CmpDir::kEq, x, y), DType::kBool, {6}, {0, 1, 0, 0, 0, 0});
  expect_buf(cmp(CmpDir::kNe, x, y), DType::kBool, {6}, {1, 0, 1, 1, 1, 1});
  expect_buf(cmp(CmpDir::kLt, x, y), DType::kBool, {6}, {1, 0, 0, 0, 0, 1});
  expect_buf(cmp(CmpDir::kLe, x, y), DType::kBool, {6}, {1, 1, 0, 0, 0, 1});
  expect_buf(cmp(CmpDir::kGt, x, y), DType::kBool, {6}, {0, 0, 1, 0, 0, 0});
  expect_buf(cmp(CmpDir::kGe, x, y), DType::kBool, {6}, {0, 1, 1, 0, 0, 0});
}

TEST(Compare, I32AndPred) {
  const Buffer x = i32({3}, {-1, 5, kI32Min});
  const Buffer y = i32({3}, {1, 5, kI32Max});
  expect_buf(cmp(CmpDir::kLt, x, y), DType::kBool, {3}, {1, 0, 1});
  expect_buf(cmp(CmpDir::kGe, x, y), DType::kBool, {3}, {0, 1, 0});
  const Buffer p = pred({4}, {1, 1, 0, 0});
  const Buffer q = pred({4}, {1, 0, 1, 0});
  expect_buf(cmp(CmpDir::kEq, p, q), DType::kBool, {4}, {1, 0, 0, 1});
  expect_buf(cmp(CmpDir::kNe, p, q), DType::kBool, {4}, {0, 1, 1, 0});
}

TEST(And, TruthTable) {
  expect_buf(binary(OpKind::kAnd, pred({4}, {1, 1, 0, 0}), pred({4}, {1, 0, 1, 0})), DType::kBool, {4}, {1, 0, 0, 0});
}

TEST(Or, TruthTable) {
  expect_buf(binary(OpKind::kOr, pred({4}, {1, 1, 0, 0}), pred({4}, {1, 0, 1, 0})), DType::kBool, {4}, {1, 1, 1, 0});
}

TEST(And, BroadcastsPred) {
  // [2,1] & [3] -> [2,3]: row 0 is all false, row 1 copies the [3] operand.
  expect_buf(binary(OpKind::kAnd, pred({2, 1}, {0, 1}), pred({3}, {1, 0, 1})), DType::kBool, {2, 3},
             {0, 0, 0, 1, 0, 1});
}

// ---------------------------------------------------------------- numpy broadcasting

TEST(Add, BroadcastColumnByRow) {
  const std::vector<double> a{10, 20, 30}, c{1, 2, 3, 4};
  Buffer out = binary(OpKind::kAdd, f32({3, 1}, a), f32({1, 4}, c));
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want.push_back(a[i] + c[j]);
  }
  expect_buf(out, DType::kF32, {3, 4}, want);
}

TEST(Mul, RankZeroLiteralWithTensor) {
  const Buffer x = f32({2, 2}, {1, -2, 3, 0.5});
  expect_buf(run_expr([&](Builder& b) { return input(b, "x", x) * 3.0; }), DType::kF32, {2, 2}, {3, -6, 9, 1.5});
  expect_buf(run_expr([&](Builder& b) { return 10.0 - input(b, "x", x); }), DType::kF32, {2, 2}, {9, 12, 7, 9.5});
  // literal op literal stays rank 0
  expect_buf(run_expr([&](Builder& b) { return b.literal(2.0) + b.literal(0.25); }), DType::kF32, {}, {2.25});
}

TEST(Sub, TrailingVectorBroadcast) {
  // [2,3] - [3]: each row minus the vector.
  expect_buf(binary(OpKind::kSub, f32({2, 3}, {10, 20, 30, 40, 50, 60}), f32({3}, {1, 2, 3})), DType::kF32, {2, 3},
             {9, 18, 27, 39, 48, 57});
  // and the other way round: [3] - [2,3]
  expect_buf(binary(OpKind::kSub, f32({3}, {1, 2, 3}), f32({2, 3}, {10, 20, 30, 40, 50, 60})), DType::kF32, {2, 3},
             {-9, -18, -27, -39, -48, -57});
}

TEST(Add, SizeOneAxesOnBothSides) {
  // [2,1,3] + [4,1] -> [2,4,3]: out[i][j][k] = a[i][0][k] + c[j][0].
  const std::vector<double> a{0, 1, 2, 100, 101, 102}, c{10, 20, 30, 40};
  Buffer out = binary(OpKind::kAdd, f32({2, 1, 3}, a), f32({4, 1}, c));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      for (int k = 0; k < 3; ++k) want.push_back(a[i * 3 + k] + c[j]);
    }
  }
  expect_buf(out, DType::kF32, {2, 4, 3}, want);
  // [1] with [2,3] stretches the single element.
  expect_buf(binary(OpKind::kMul, f32({1}, {2}), f32({2, 3}, {1, 2, 3, 4, 5, 6})), DType::kF32, {2, 3},
             {2, 4, 6, 8, 10, 12});
}

TEST(Add, ZeroSizeDim) {
  expect_buf(binary(OpKind::kAdd, f32({0, 3}, {}), f32({3}, {1, 2, 3})), DType::kF32, {0, 3}, {});
  expect_buf(binary(OpKind::kAdd, f32({0, 1}, {}), f32({1, 3}, {1, 2, 3})), DType::kF32, {0, 3}, {});
  expect_buf(cmp(CmpDir::kLt, i32({2, 0}, {}), i32({1}, {4})), DType::kBool, {2, 0}, {});
}

// ---------------------------------------------------------------- select

TEST(Select, BroadcastPredicateColumn) {
  // pred [3,1], on_true [3,4] = 0..11, on_false a rank-0 literal -1.
  const std::vector<double> p{1, 0, 1};
  std::vector<double> t(12);
  for (int i = 0; i < 12; ++i) t[i] = i;
  Buffer out = run_expr([&](Builder& b) {
    return b.select(input(b, "p", pred({3, 1}, p)), input(b, "t", f32({3, 4}, t)), b.literal(-1.0));
  });
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want.push_back(p[i] != 0 ? t[i * 4 + j] : -1.0);
  }
  expect_buf(out, DType::kF32, {3, 4}, want);
}

TEST(Select, AllThreeOperandsBroadcast) {
  // pred [4] picks per column between on_true [3,1] (per row) and on_false [1,4] (per column).
  const std::vector<double> p{1, 0, 0, 1}, t{10, 20, 30}, f{-1, -2, -3, -4};
  Buffer out = run_expr([&](Builder& b) {
    return b.select(input(b, "p", pred({4}, p)), input(b, "t", i32({3, 1}, t)), input(b, "f", i32({1, 4}, f)));
  });
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want.push_back(p[j] != 0 ? t[i] : f[j]);
  }
  expect_buf(out, DType::kI32, {3, 4}, want);
}

// ---------------------------------------------------------------- cast

Buffer cast(const Buffer& x, DType to, Precision p = Precision::kF64) {
  return run_expr([&](Builder& b) { return b.cast(input(b, "x", x), to); }, p);
}
Error cast_err(const Buffer& x, DType to) {
  return run_expr_error([&](Builder& b) { return b.cast(input(b, "x", x), to); });
}

TEST(Cast, F32ToI32Truncates) {
  // 2147483520 = 2^31 - 128 is the largest float below 2^31; -2^31 is exact in f32.
  expect_buf(cast(f32({8}, {1.9, -1.9, 0.5, -0.5, 7, -7, 2147483520.0, kI32Min}), DType::kI32), DType::kI32, {8},
             {1, -1, 0, 0, 7, -7, 2147483520.0, kI32Min});
}

TEST(Cast, F32ToI32OutOfRangeIsInvalidInput) {
  for (double bad : {2147483648.0, 3e9, -2147483904.0, kInf, -kInf, kNaN}) {
    Error e = cast_err(f32({2}, {1, bad}), DType::kI32);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << bad << ": " << e.to_string();
    EXPECT_NE(e.message().find("element 1"), std::string::npos) << e.message();
  }
}

TEST(Cast, ToPredAndBack) {
  Buffer p = cast(f32({5}, {0, -0.0, 2.5, -1, 1e-30}), DType::kBool);
  expect_buf(p, DType::kBool, {5}, {0, 0, 1, 1, 1});
  expect_buf(cast(i32({3}, {0, -4, 9}), DType::kBool), DType::kBool, {3}, {0, 1, 1});
  const Buffer q = pred({4}, {1, 0, 0, 1});
  expect_buf(cast(q, DType::kF32), DType::kF32, {4}, {1, 0, 0, 1});
  expect_buf(cast(q, DType::kI32), DType::kI32, {4}, {1, 0, 0, 1});
  // f32 -> pred -> f32 round trip in one graph
  Buffer rt = run_expr([&](Builder& b) { return b.cast(b.cast(input(b, "x", f32({3}, {-3, 0, 0.25})), DType::kBool), DType::kF32); });
  expect_buf(rt, DType::kF32, {3}, {1, 0, 1});
}

TEST(Cast, I32ToF32RoundsInNativeOnly) {
  // 2^24 + 1 is not a float: native rounds it (ties-to-even) to 2^24; f64 keeps it.
  const Buffer x = i32({2}, {16777217, -3});
  expect_buf(cast(x, DType::kF32, Precision::kNative), DType::kF32, {2}, {16777216, -3});
  expect_buf(cast(x, DType::kF32, Precision::kF64), DType::kF32, {2}, {16777217, -3});
}

// ---------------------------------------------------------------- iota

TEST(Iota, EachAxisOf3d) {
  const Shape s{2, 3, 4};
  for (int64_t axis = 0; axis < 3; ++axis) {
    Buffer out = run_expr([&](Builder& b) { return b.iota(s, axis); });
    std::vector<double> want;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 4; ++k) want.push_back(axis == 0 ? i : axis == 1 ? j : k);
      }
    }
    SCOPED_TRACE(axis);
    expect_buf(out, DType::kI32, s, want);
  }
}

TEST(Iota, F32AndNegativeAxis) {
  expect_buf(run_expr([&](Builder& b) { return b.iota({2, 3}, -1, DType::kF32); }), DType::kF32, {2, 3}, {0, 1, 2, 0, 1, 2});
}

// ---------------------------------------------------------------- native vs f64 rounding

TEST(Add, NativeRoundsToF32F64IsExact) {
  // Constants are f32, so both modes add 0.1f and 0.2f; only native rounds the sum.
  const Buffer a = f32({1}, {0.1});
  const Buffer c = f32({1}, {0.2});
  const double exact = static_cast<double>(0.1f) + static_cast<double>(0.2f);  // 0.300000004470348358...
  const double rounded = static_cast<double>(0.1f + 0.2f);                   // 0.300000011920928955... = 0.3f
  ASSERT_NE(exact, rounded);
  auto f = [&](Builder& b) { return input(b, "a", a) + input(b, "c", c); };
  expect_buf(run_expr(f, Precision::kNative), DType::kF32, {1}, {rounded});
  expect_buf(run_expr(f, Precision::kF64), DType::kF32, {1}, {exact});
}

TEST(Add, LiteralsRoundOnlyInNative) {
  // Literals are kept as written in f64 mode: 0.1 + 0.2 = 0.30000000000000004 in double.
  auto f = [](Builder& b) { return b.literal(0.1) + b.literal(0.2); };
  expect_buf(run_expr(f, Precision::kF64), DType::kF32, {}, {0.1 + 0.2});
  expect_buf(run_expr(f, Precision::kNative), DType::kF32, {}, {static_cast<double>(0.1f + 0.2f)});
}

TEST(Div, NativeRoundsEachStep) {
  // x/3 then *3: native rounds after each step (float(1/3) = 0.3333333432...), f64 does not.
  const Buffer one = f32({1}, {1});
  auto f = [&](Builder& b) { return (input(b, "x", one) / 3.0) * 3.0; };
  const double third_f = static_cast<double>(static_cast<float>(1.0 / 3.0));
  expect_buf(run_expr(f, Precision::kNative), DType::kF32, {1}, {static_cast<double>(static_cast<float>(third_f * 3.0))});
  expect_buf(run_expr(f, Precision::kF64), DType::kF32, {1}, {(1.0 / 3.0) * 3.0});
  Buffer d = run_expr([&](Builder& b) { return input(b, "x", one) / 3.0; }, Precision::kNative);
  expect_buf(d, DType::kF32, {1}, {third_f});
  ASSERT_EQ(d.data.size(), 1u);
  EXPECT_NE(d.data[0], 1.0 / 3.0);
}

}  // namespace
}  // namespace kvf
