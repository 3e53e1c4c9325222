// Oracle semantics of the indexing primitives (gather, scatter_update,
// dynamic_update_slice) and matmul. Bad indices must be typed errors naming the index.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "eval/buffers.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::f32;
using testing::i32;
using testing::ramp;

using eval::Buffer;
using ir::Builder;
using testing::eval_expr;
using testing::expect_buf;
using testing::input;
using testing::mentions;
using testing::run_expr;
using testing::run_expr_error;

// ---------------------------------------------------------------- gather

TEST(Gather, EmbeddingLookup2dIndices) {
  // table[r][c] = 10r + c, idx [[4,0],[2,2]] -> out[i][j][c] = table[idx[i][j]][c]
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 3; ++c) t.push_back(10 * r + c);
  }
  const Buffer table = f32({5, 3}, t);
  Buffer out = run_expr([&](Builder& b) { return b.gather(input(b, "t", table), input(b, "i", i32({2, 2}, {4, 0, 2, 2}))); });
  expect_buf(out, DType::kF32, {2, 2, 3}, {40, 41, 42, 0, 1, 2, 20, 21, 22, 20, 21, 22});
}

TEST(Gather, ScalarIndexAnd3dTable) {
  // rank-0 index picks one [2,2] slab of a [3,2,2] table
  const Buffer table = ramp({3, 2, 2});
  expect_buf(run_expr([&](Builder& b) { return b.gather(input(b, "t", table), b.literal(1, DType::kI32)); }), DType::kF32,
             {2, 2}, {4, 5, 6, 7});
  // 1-d indices over an i32 table
  Buffer it = i32({3, 1}, {-5, 6, 7});
  expect_buf(run_expr([&](Builder& b) { return b.gather(input(b, "t", it), input(b, "i", i32({4}, {2, 2, 0, 1}))); }),
             DType::kI32, {4, 1}, {7, 7, -5, 6});
}

TEST(Gather, OutOfRangeIndexIsInvalidInput) {
  const Buffer table = ramp({5, 3});
  for (double bad : {5.0, 100.0, -1.0}) {
    Error e = run_expr_error([&](Builder& b) { return b.gather(input(b, "t", table), input(b, "i", i32({3}, {0, bad, 1}))); });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.to_string();
    EXPECT_TRUE(mentions(e, "index " + std::to_string(static_cast<int>(bad)))) << e.message();
    EXPECT_TRUE(mentions(e, "position 1")) << e.message();
  }
}

// ---------------------------------------------------------------- scatter_update

TEST(ScatterUpdate, ReplacesRows) {
  // base [4,2] = 0..7; rows 3 and 1 replaced by [1,2] and [3,4]
  const Buffer base = ramp({4, 2});
  Buffer out = run_expr([&](Builder& b) {
    return b.scatter_update(input(b, "x", base), input(b, "i", i32({2}, {3, 1})), input(b, "u", f32({2, 2}, {1, 2, 3, 4})));
  });
  expect_buf(out, DType::kF32, {4, 2}, {0, 1, 3, 4, 4, 5, 1, 2});
}

TEST(ScatterUpdate, MinusOneWritesNothing) {
  const Buffer base = ramp({3, 2});
  Buffer out = run_expr([&](Builder& b) {
    return b.scatter_update(input(b, "x", base), input(b, "i", i32({3}, {-1, 0, -1})),
                            input(b, "u", f32({3, 2}, {91, 92, 93, 94, 95, 96})));
  });
  expect_buf(out, DType::kF32, {3, 2}, {93, 94, 2, 3, 4, 5});
  Buffer none = run_expr([&](Builder& b) {
    return b.scatter_update(input(b, "x", base), input(b, "i", i32({2}, {-1, -1})), input(b, "u", f32({2, 2}, {9, 9, 9, 9})));
  });
  expect_buf(none, DType::kF32, {3, 2}, base.data);
}

TEST(ScatterUpdate, OutOfRangeIsInvalidInput) {
  const Buffer base = ramp({3, 2});
  for (double bad : {3.0, -2.0}) {
    Error e = run_expr_error([&](Builder& b) {
      return b.scatter_update(input(b, "x", base), input(b, "i", i32({2}, {0, bad})), input(b, "u", f32({2, 2}, {1, 2, 3, 4})));
    });
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.to_string();
    EXPECT_TRUE(mentions(e, "index " + std::to_string(static_cast<int>(bad)))) << e.message();
  }
}

TEST(ScatterUpdate, DuplicateIndexIsInvalidInput) {
  const Buffer base = ramp({3, 2});
  Error e = run_expr_error([&](Builder& b) {
    return b.scatter_update(input(b, "x", base), input(b, "i", i32({3}, {2, 0, 2})),
                            input(b, "u", f32({3, 2}, {1, 2, 3, 4, 5, 6})));
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.to_string();
  EXPECT_TRUE(mentions(e, "row 2")) << e.message();
}

// ---------------------------------------------------------------- dynamic_update_slice

// base [3,2,5,2] ramp; upd ramp + 1000 of shape upd_shape placed at start along axis.
Result<Buffer> dus4(const Shape& upd_shape, int64_t axis, double start) {
  const Buffer base = ramp({3, 2, 5, 2});
  const Buffer upd = ramp(upd_shape, 1000);
  return eval_expr([&](Builder& b) {
    return b.dynamic_update_slice(input(b, "x", base), input(b, "u", upd), input(b, "s", i32({1}, {start})), axis);
  });
}

// The expected DUS result computed directly: out[a][b][c][d] is upd at the shifted index
// when the axis index falls inside [start, start + n), else base.
std::vector<double> dus4_want(const Shape& upd_shape, int64_t axis, int64_t start) {
  const Shape bs{3, 2, 5, 2};
  std::vector<double> want;
  for (int64_t a = 0; a < bs[0]; ++a) {
    for (int64_t b = 0; b < bs[1]; ++b) {
      for (int64_t c = 0; c < bs[2]; ++c) {
        for (int64_t d = 0; d < bs[3]; ++d) {
          int64_t idx[4] = {a, b, c, d};
          const int64_t k = idx[axis] - start;
          if (k >= 0 && k < upd_shape[static_cast<size_t>(axis)]) {
            idx[axis] = k;
            want.push_back(1000.0 + static_cast<double>(((idx[0] * upd_shape[1] + idx[1]) * upd_shape[2] + idx[2]) * upd_shape[3] + idx[3]));
          } else {
            want.push_back(static_cast<double>(((a * bs[1] + b) * bs[2] + c) * bs[3] + d));
          }
        }
      }
    }
  }
  return want;
}

TEST(DynamicUpdateSlice, Axis0Of4d) {
  for (int64_t start : {0, 1, 2}) {
    SCOPED_TRACE(start);
    Result<Buffer> r = dus4({1, 2, 5, 2}, 0, static_cast<double>(start));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    expect_buf(*r, DType::kF32, {3, 2, 5, 2}, dus4_want({1, 2, 5, 2}, 0, start));
  }
}

TEST(DynamicUpdateSlice, Axis2Of4d) {
  for (int64_t start : {0, 2, 3}) {  // 3 + 2 == 5: the last fitting start
    SCOPED_TRACE(start);
    Result<Buffer> r = dus4({3, 2, 2, 2}, 2, static_cast<double>(start));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    expect_buf(*r, DType::kF32, {3, 2, 5, 2}, dus4_want({3, 2, 2, 2}, 2, start));
  }
  // spot-check one element by hand: out[0][0][2][1] is upd[0][0][0][1] = 1001 at start 2
  Result<Buffer> r = dus4({3, 2, 2, 2}, 2, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data[3], 3);     // (0,0,1,1): before the window, base
  EXPECT_EQ(r->data[5], 1001);  // (0,0,2,1) = upd[0][0][0][1]
  EXPECT_EQ(r->data[6], 1002);  // (0,0,3,0) = upd[0][0][1][0]
  EXPECT_EQ(r->data[8], 8);     // (0,0,4,0): past the window, base
}

TEST(DynamicUpdateSlice, StartPastEndIsCapacity) {
  for (double start : {4.0, 5.0, 100.0}) {
    Result<Buffer> r = dus4({3, 2, 2, 2}, 2, start);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), ErrorCode::kCapacity) << r.error().to_string();
  }
  Result<Buffer> r0 = dus4({2, 2, 5, 2}, 0, 2);  // 2 rows at 2 overflow 3
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.error().code(), ErrorCode::kCapacity) << r0.error().to_string();
}

TEST(DynamicUpdateSlice, NegativeStartIsInvalidInput) {
  Result<Buffer> r = dus4({3, 2, 2, 2}, 2, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "-1")) << r.error().message();
}

// ---------------------------------------------------------------- matmul

// Direct triple loop over row-major [.., M, K] x [.., K, N] with numpy-broadcast batches
// of rank <= 2 (batch shapes padded on the left to two axes).
std::vector<double> ref_matmul(const Buffer& a, const Buffer& b, Shape& out_shape) {
  auto batch2 = [](const Shape& s) {
    Shape bs(s.begin(), s.end() - 2);
    while (bs.size() < 2) bs.insert(bs.begin(), 1);
    return bs;
  };
  const Shape ab = batch2(a.shape), bb = batch2(b.shape);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  const int64_t p0 = std::max(ab[0], bb[0]), p1 = std::max(ab[1], bb[1]);
  std::vector<double> out;
  for (int64_t i0 = 0; i0 < p0; ++i0) {
    for (int64_t i1 = 0; i1 < p1; ++i1) {
      const int64_t am = (ab[0] == 1 ? 0 : i0) * ab[1] + (ab[1] == 1 ? 0 : i1);
      const int64_t bm = (bb[0] == 1 ? 0 : i0) * bb[1] + (bb[1] == 1 ? 0 : i1);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t t = 0; t < k; ++t) acc += a.data[am * m * k + i * k + t] * b.data[bm * k * n + t * n + j];
          out.push_back(acc);
        }
      }
    }
  }
  const size_t rank = std::max(a.shape.size(), b.shape.size());
  out_shape = {p0, p1, m, n};
  out_shape.erase(out_shape.begin(), out_shape.begin() + static_cast<int64_t>(4 - rank));
  return out;
}

Buffer matmul(const Buffer& a, const Buffer& b) {
  return run_expr([&](Builder& bl) { return bl.matmul(input(bl, "a", a), input(bl, "b", b)); });
}

TEST(MatMul, HandComputed2x3By3x2) {
  // [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]]
  expect_buf(matmul(f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})), DType::kF32, {2, 2},
             {58, 64, 139, 154});
}

TEST(MatMul, Batched) {
  // batch 0 is the hand-computed case; batch 1 is [[1,0,0],[0,1,0]] @ B1 = B1's first two rows.
  const Buffer a = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  const Buffer b = f32({2, 3, 2}, {7, 8, 9, 10, 11, 12, -1, -2, -3, -4, -5, -6});
  expect_buf(matmul(a, b), DType::kF32, {2, 2, 2}, {58, 64, 139, 154, -1, -2, -3, -4});
}

TEST(MatMul, BatchBroadcast) {
  // [2,1,2,3] @ [3,3,2] -> [2,3,2,2]
  const Buffer a = ramp({2, 1, 2, 3}, -5);
  const Buffer b = ramp({3, 3, 2}, -8);
  Shape want_shape;
  const std::vector<double> want = ref_matmul(a, b, want_shape);
  ASSERT_EQ(shape_str(want_shape), "[2,3,2,2]");
  expect_buf(matmul(a, b), DType::kF32, {2, 3, 2, 2}, want);
  // and a rank-2 rhs shared by every batch
  const Buffer w = ramp({3, 4}, 1);
  const std::vector<double> want2 = ref_matmul(a, w, want_shape);
  expect_buf(matmul(a, w), DType::kF32, {2, 1, 2, 4}, want2);
}

TEST(MatMul, ThreadsGiveIdenticalResults) {
  std::mt19937_64 rng(testing::test_seed());
  const Buffer a = testing::random_buffer(rng, {3, 37, 19});
  const Buffer b = testing::random_buffer(rng, {19, 23});
  ir::Builder bl("mm");
  bl.output("out", bl.matmul(input(bl, "a", a), input(bl, "b", b)));
  Result<ir::Graph> g = bl.finish();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  Shape want_shape;
  const std::vector<double> want = ref_matmul(a, b, want_shape);
  for (eval::Precision p : {eval::Precision::kF64, eval::Precision::kNative}) {
    std::vector<std::vector<double>> results;
    for (int threads : {1, 2, 3}) {
      eval::StateStore state;
      eval::Oracle oracle({.precision = p, .threads = threads});
      Result<eval::Outputs> out = oracle.run(*g, {}, state);
      ASSERT_TRUE(out.ok()) << out.error().to_string();
      const Buffer& o = out->at("out");
      ASSERT_EQ(shape_str(o.shape), shape_str(want_shape));
      results.push_back(o.data);
    }
    EXPECT_EQ(results[0], results[1]) << "threads=2 differs from threads=1";
    EXPECT_EQ(results[0], results[2]) << "threads=3 differs from threads=1";
    if (p == eval::Precision::kF64) {
      EXPECT_EQ(results[0], want) << "differs from the direct loop";
    }
  }
}

}  // namespace
}  // namespace kvf
