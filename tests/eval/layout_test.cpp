// Oracle semantics of the reductions and layout primitives: reduce_sum/reduce_max,
// reshape, transpose, broadcast, slice, concat. Expected values are hand-derived from
// closed forms (x[a][b][c] = 12a + 4b + c for the 2x3x4 tensor) or direct loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "eval/buffers.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::f32;
using testing::i32;
using testing::ramp;

using eval::Buffer;
using ir::Builder;
using ir::V;
using testing::expect_buf;
using testing::input;
using testing::run_expr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// x[a][b][c] of the 2x3x4 ramp.
double x3(int a, int b, int c) { return 12 * a + 4 * b + c; }

// ---------------------------------------------------------------- reduce_sum

TEST(ReduceSum, LastAxis) {
  // sum_c (12a + 4b + c) = 48a + 16b + 6
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {2}); }), DType::kF32, {2, 3},
             {6, 22, 38, 54, 70, 86});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {-1}, true); }), DType::kF32, {2, 3, 1},
             {6, 22, 38, 54, 70, 86});
}

TEST(ReduceSum, FirstAxis) {
  // sum_a (12a + 4b + c) = 12 + 8b + 2c
  const Buffer x = ramp({2, 3, 4});
  std::vector<double> want;
  for (int b = 0; b < 3; ++b) {
    for (int c = 0; c < 4; ++c) want.push_back(12 + 8 * b + 2 * c);
  }
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {0}); }), DType::kF32, {3, 4}, want);
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {0}, true); }), DType::kF32, {1, 3, 4}, want);
}

TEST(ReduceSum, MiddleAxis) {
  // sum_b (12a + 4b + c) = 36a + 12 + 3c
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {1}); }), DType::kF32, {2, 4},
             {12, 15, 18, 21, 48, 51, 54, 57});
}

TEST(ReduceSum, TwoNonAdjacentAxes) {
  // sum over a and c: 32b + 60
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {0, 2}); }), DType::kF32, {3}, {60, 92, 124});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {2, 0}, true); }), DType::kF32, {1, 3, 1},
             {60, 92, 124});
}

TEST(ReduceSum, AllAxes) {
  // 0 + 1 + ... + 23 = 276
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {0, 1, 2}); }), DType::kF32, {}, {276});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {0, 1, 2}, true); }), DType::kF32, {1, 1, 1},
             {276});
}

TEST(ReduceSum, I32) {
  Result<Buffer> x = Buffer::i32({2, 2}, {7, -3, 2147483600, 40});
  ASSERT_TRUE(x.ok());
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", *x), {1}); }), DType::kI32, {2}, {4, 2147483640});
}

TEST(ReduceSum, I32Wraparound) {
  // like i32 add, the sum wraps: (2^31 - 1) + 1 = -2^31, and -2^31 + -1 = 2^31 - 1
  Result<Buffer> x = Buffer::i32({2, 2}, {2147483647, 1, -2147483647 - 1, -1});
  ASSERT_TRUE(x.ok());
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", *x), {1}); }), DType::kI32, {2},
             {-2147483648.0, 2147483647.0});
}

// ---------------------------------------------------------------- reduce_max

TEST(ReduceMax, SingleAxis) {
  // max over b is b = 2: 12a + 8 + c
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {1}); }), DType::kF32, {2, 4},
             {8, 9, 10, 11, 20, 21, 22, 23});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {1}, true); }), DType::kF32, {2, 1, 4},
             {8, 9, 10, 11, 20, 21, 22, 23});
}

TEST(ReduceMax, MultipleAxes) {
  // over a and b: 20 + c; over b and c: 12a + 11
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {0, 1}); }), DType::kF32, {4}, {20, 21, 22, 23});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {1, 2}, true); }), DType::kF32, {2, 1, 1},
             {11, 23});
}

TEST(ReduceMax, NegativeValuesAndInf) {
  // all-negative rows must not come back as the 0 a wrong initial value would give
  const Buffer x = f32({3, 3}, {-5, -2, -9, -kInf, -kInf, -kInf, -1, kInf, 3});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {1}); }), DType::kF32, {3}, {-2, -kInf, kInf});
}

TEST(ReduceMax, NaNPropagates) {
  // NaN first, NaN last, NaN in the middle, no NaN.
  const Buffer x = f32({4, 3}, {kNaN, 5, 1, 5, 1, kNaN, 1, kNaN, 9, 1, 2, 3});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {1}); }), DType::kF32, {4},
             {kNaN, kNaN, kNaN, 3});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_max(input(b, "x", x), {0}); }), DType::kF32, {3}, {kNaN, kNaN, kNaN});
}

TEST(ReduceSum, NaNPropagates) {
  const Buffer x = f32({2, 2}, {kNaN, 1, 2, 3});
  expect_buf(run_expr([&](Builder& b) { return b.reduce_sum(input(b, "x", x), {1}); }), DType::kF32, {2}, {kNaN, 5});
}

// ---------------------------------------------------------------- reshape, transpose, broadcast

TEST(Reshape, KeepsRowMajorOrder) {
  const Buffer x = ramp({2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.reshape(input(b, "x", x), {6, 4}); }), DType::kF32, {6, 4}, x.data);
  expect_buf(run_expr([&](Builder& b) { return b.reshape(input(b, "x", x), {4, -1}); }), DType::kF32, {4, 6}, x.data);
  expect_buf(run_expr([&](Builder& b) { return b.reshape(input(b, "x", x), {24}); }), DType::kF32, {24}, x.data);
  // reshape then index: [6,4] row r, column c is element 4r + c
  Buffer s = run_expr([&](Builder& b) { return b.slice(b.reshape(input(b, "x", x), {6, 4}), {5, 1}, {6, 2}); });
  expect_buf(s, DType::kF32, {1, 1}, {21});
}

TEST(Transpose, ThreeDimPermutations) {
  const Buffer x = ramp({2, 3, 4});
  // perm {2,0,1}: out[p][q][r] = x[q][r][p], shape [4,2,3]
  Buffer t = run_expr([&](Builder& b) { return b.transpose(input(b, "x", x), {2, 0, 1}); });
  std::vector<double> want;
  for (int p = 0; p < 4; ++p) {
    for (int q = 0; q < 2; ++q) {
      for (int r = 0; r < 3; ++r) want.push_back(x3(q, r, p));
    }
  }
  expect_buf(t, DType::kF32, {4, 2, 3}, want);
  // perm {1,2,0}: out[p][q][r] = x[r][p][q], shape [3,4,2]
  Buffer u = run_expr([&](Builder& b) { return b.transpose(input(b, "x", x), {1, 2, 0}); });
  want.clear();
  for (int p = 0; p < 3; ++p) {
    for (int q = 0; q < 4; ++q) {
      for (int r = 0; r < 2; ++r) want.push_back(x3(r, p, q));
    }
  }
  expect_buf(u, DType::kF32, {3, 4, 2}, want);
  // the two permutations are inverses
  Buffer back = run_expr([&](Builder& b) { return b.transpose(b.transpose(input(b, "x", x), {2, 0, 1}), {1, 2, 0}); });
  expect_buf(back, DType::kF32, {2, 3, 4}, x.data);
}

TEST(Transpose, SwapLastTwoWithNegativeAxes) {
  const Buffer x = ramp({2, 3});
  expect_buf(run_expr([&](Builder& b) { return b.transpose(input(b, "x", x), {-1, -2}); }), DType::kF32, {3, 2},
             {0, 3, 1, 4, 2, 5});
}

TEST(Broadcast, ColumnTo3d) {
  // [3,1] -> [2,3,4]: out[a][b][c] = x[b]
  const Buffer x = f32({3, 1}, {7, -1, 2.5});
  Buffer out = run_expr([&](Builder& b) { return b.broadcast(input(b, "x", x), {2, 3, 4}); });
  std::vector<double> want;
  for (int a = 0; a < 2; ++a) {
    for (int bb = 0; bb < 3; ++bb) {
      for (int c = 0; c < 4; ++c) want.push_back(x.data[static_cast<size_t>(bb)]);
    }
  }
  expect_buf(out, DType::kF32, {2, 3, 4}, want);
}

TEST(Broadcast, RowAndScalar) {
  expect_buf(run_expr([&](Builder& b) { return b.broadcast(input(b, "x", f32({3}, {1, 2, 3})), {2, 3}); }), DType::kF32,
             {2, 3}, {1, 2, 3, 1, 2, 3});
  expect_buf(run_expr([&](Builder& b) { return b.broadcast(b.literal(4.0), {2, 2}); }), DType::kF32, {2, 2}, {4, 4, 4, 4});
  expect_buf(run_expr([&](Builder& b) { return b.broadcast(input(b, "x", f32({3}, {1, 2, 3})), {0, 3}); }), DType::kF32,
             {0, 3}, {});
}

// ---------------------------------------------------------------- slice

TEST(Slice, StartsLimitsSteps3d) {
  // starts {0,1,1}, limits {2,3,4}, steps {1,1,2}: out[a][b][c] = x[a][1+b][1+2c], shape [2,2,2]
  const Buffer x = ramp({2, 3, 4});
  Buffer out = run_expr([&](Builder& b) { return b.slice(input(b, "x", x), {0, 1, 1}, {2, 3, 4}, {1, 1, 2}); });
  std::vector<double> want;
  for (int a = 0; a < 2; ++a) {
    for (int bb = 0; bb < 2; ++bb) {
      for (int c = 0; c < 2; ++c) want.push_back(x3(a, 1 + bb, 1 + 2 * c));
    }
  }
  expect_buf(out, DType::kF32, {2, 2, 2}, want);
}

TEST(Slice, StepTwoOnEveryAxis) {
  // steps {2,2,2} from 0: a in {0}, b in {0,2}, c in {0,2}
  const Buffer x = ramp({2, 3, 4});
  Buffer out = run_expr([&](Builder& b) { return b.slice(input(b, "x", x), {0, 0, 0}, {2, 3, 4}, {2, 2, 2}); });
  expect_buf(out, DType::kF32, {1, 2, 2}, {x3(0, 0, 0), x3(0, 0, 2), x3(0, 2, 0), x3(0, 2, 2)});
}

TEST(Slice, OneDimensionalStrides) {
  const Buffer x = ramp({10});
  expect_buf(run_expr([&](Builder& b) { return b.slice(input(b, "x", x), {1}, {8}, {3}); }), DType::kF32, {3}, {1, 4, 7});
  expect_buf(run_expr([&](Builder& b) { return b.slice(input(b, "x", x), {2}, {6}); }), DType::kF32, {4}, {2, 3, 4, 5});
  expect_buf(run_expr([&](Builder& b) { return b.slice(input(b, "x", x), {4}, {4}); }), DType::kF32, {0}, {});
  expect_buf(run_expr([&](Builder& b) { return b.slice_axis(input(b, "x", x), 0, 9, 10); }), DType::kF32, {1}, {9});
}

TEST(Slice, SliceAxisMiddle) {
  // slice_axis(x, 1, 1, 3): out[a][b][c] = x[a][1+b][c]
  const Buffer x = ramp({2, 3, 4});
  Buffer out = run_expr([&](Builder& b) { return b.slice_axis(input(b, "x", x), -2, 1, 3); });
  std::vector<double> want;
  for (int a = 0; a < 2; ++a) {
    for (int bb = 0; bb < 2; ++bb) {
      for (int c = 0; c < 4; ++c) want.push_back(x3(a, 1 + bb, c));
    }
  }
  expect_buf(out, DType::kF32, {2, 2, 4}, want);
}

// ---------------------------------------------------------------- concat

// Concatenates three ramps (offsets 100, 200, 300) of the given shapes along axis and
// checks every element against the operand it must come from.
void check_concat3(const std::vector<Shape>& shapes, int64_t axis, const Shape& out_shape) {
  std::vector<Buffer> parts;
  for (size_t k = 0; k < shapes.size(); ++k) parts.push_back(ramp(shapes[k], 100.0 * static_cast<double>(k + 1)));
  Buffer out = run_expr([&](Builder& b) {
    std::vector<V> xs;
    for (size_t k = 0; k < parts.size(); ++k) xs.push_back(input(b, "p" + std::to_string(k), parts[k]));
    return b.concat(xs, axis);
  });
  std::vector<double> want;
  for (int64_t i = 0; i < out_shape[0]; ++i) {
    for (int64_t j = 0; j < out_shape[1]; ++j) {
      for (int64_t l = 0; l < out_shape[2]; ++l) {
        int64_t idx[3] = {i, j, l};
        size_t k = 0;
        while (idx[axis] >= shapes[k][static_cast<size_t>(axis)]) idx[axis] -= shapes[k++][static_cast<size_t>(axis)];
        const Shape& s = shapes[k];
        const int64_t flat = (idx[0] * s[1] + idx[1]) * s[2] + idx[2];
        want.push_back(100.0 * static_cast<double>(k + 1) + static_cast<double>(flat));
      }
    }
  }
  expect_buf(out, DType::kF32, out_shape, want);
}

TEST(Concat, Axis0ThreeOperands) { check_concat3({{1, 2, 3}, {2, 2, 3}, {1, 2, 3}}, 0, {4, 2, 3}); }
TEST(Concat, MiddleAxisThreeOperands) { check_concat3({{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}, 1, {2, 6, 3}); }
TEST(Concat, LastAxisThreeOperands) { check_concat3({{2, 2, 1}, {2, 2, 2}, {2, 2, 3}}, 2, {2, 2, 6}); }

TEST(Concat, HandWritten2d) {
  // [[1,2],[3,4]] ++ [[5],[6]] along the last axis, and ++ [[7,8]] along axis 0
  const Buffer a = f32({2, 2}, {1, 2, 3, 4});
  expect_buf(run_expr([&](Builder& b) { return b.concat({input(b, "a", a), input(b, "c", f32({2, 1}, {5, 6}))}, -1); }),
             DType::kF32, {2, 3}, {1, 2, 5, 3, 4, 6});
  expect_buf(run_expr([&](Builder& b) { return b.concat({input(b, "a", a), input(b, "c", f32({1, 2}, {7, 8}))}, 0); }),
             DType::kF32, {3, 2}, {1, 2, 3, 4, 7, 8});
  // a zero-length operand contributes nothing
  expect_buf(run_expr([&](Builder& b) { return b.concat({input(b, "a", a), input(b, "c", f32({2, 0}, {}))}, 1); }),
             DType::kF32, {2, 2}, {1, 2, 3, 4});
}

}  // namespace
}  // namespace kvf
