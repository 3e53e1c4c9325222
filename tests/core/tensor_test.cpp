// HostTensor: owning and borrowed tensors, shape checks, reshape/permute views and f32
// widening (strided walks, half types, block dequantization).
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "testing.h"

namespace kvf {
namespace {

TEST(Shape, Str) {
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(shape_str({7}), "[7]");
  EXPECT_EQ(shape_str({2, 3, 4}), "[2,3,4]");
  EXPECT_EQ(shape_str({0, 1}), "[0,1]");
}

TEST(Shape, CheckedNumel) {
  Result<int64_t> scalar = checked_numel({});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(*scalar, 1);
  Result<int64_t> n = checked_numel({2, 3, 4});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 24);
  Result<int64_t> z = checked_numel({5, 0, 3});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 0);
  Result<int64_t> neg = checked_numel({2, -1});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().code(), ErrorCode::kInvalidInput);
  Result<int64_t> huge = checked_numel({int64_t{1} << 40, int64_t{1} << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code(), ErrorCode::kInvalidInput);
}

TEST(Shape, ContiguousStrides) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({5}), (Shape{1}));
  EXPECT_EQ(contiguous_strides({}), (Shape{}));
}

// Strides of an operand read over a broadcast output: right-aligned, 0 on a missing or
// size-1 axis that the output widens.
Shape broadcast(const Shape& operand, const Shape& out) {
  Shape st(out.size(), -1);
  broadcast_strides(operand, out, st.data());
  return st;
}

TEST(Shape, BroadcastStrides) {
  EXPECT_EQ(broadcast({2, 3, 4}, {2, 3, 4}), (Shape{12, 4, 1}));  // the same shape: contiguous
  EXPECT_EQ(broadcast({4}, {2, 3, 4}), (Shape{0, 0, 1}));         // missing leading axes
  EXPECT_EQ(broadcast({3, 1}, {2, 3, 4}), (Shape{0, 1, 0}));      // a size-1 axis widened
  EXPECT_EQ(broadcast({1, 1}, {1, 5}), (Shape{1, 0}));            // size 1 against size 1 keeps its stride
  EXPECT_EQ(broadcast({}, {2, 2}), (Shape{0, 0}));                // a scalar
  EXPECT_EQ(broadcast({}, {}), (Shape{}));
}

TEST(HostTensor, ZerosIsOwnedAndZeroed) {
  Result<HostTensor> t = HostTensor::zeros(DType::kF32, {2, 3});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(t->strides(), (Shape{3, 1}));
  EXPECT_EQ(t->rank(), 2);
  EXPECT_EQ(t->numel(), 6);
  EXPECT_EQ(t->nbytes(), 24);
  EXPECT_TRUE(t->owning());
  EXPECT_TRUE(t->is_contiguous());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data<float>()[i], 0.0f);
  Result<std::vector<float>> v = t->to_f32();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::vector<float>(6, 0.0f));
}

TEST(HostTensor, ZerosSizesPerDType) {
  struct Case { DType dt; Shape shape; int64_t bytes; };
  const Case cases[] = {
      {DType::kF16, {3, 5}, 30},   {DType::kBF16, {4}, 8},     {DType::kI32, {2, 2}, 16},
      {DType::kI8, {7}, 7},        {DType::kBool, {3}, 3},     {DType::kQ8_0, {2, 32}, 68},
      {DType::kQ4_0, {4, 64}, 144}, {DType::kF32, {}, 4},      {DType::kF32, {0, 8}, 0},
  };
  for (const Case& c : cases) {
    Result<HostTensor> t = HostTensor::zeros(c.dt, c.shape);
    ASSERT_TRUE(t.ok()) << dtype_name(c.dt) << shape_str(c.shape);
    EXPECT_EQ(t->nbytes(), c.bytes) << dtype_name(c.dt) << shape_str(c.shape);
  }
}

TEST(HostTensor, Index0ViewsOneSlabOfAnyDType) {
  const std::vector<float> v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const HostTensor t = testing::must(HostTensor::from_f32({3, 2, 2}, v));
  const HostTensor mid = testing::must(t.index0(1));
  EXPECT_EQ(mid.shape(), (Shape{2, 2}));
  EXPECT_EQ(mid.data<float>()[0], 4.0f);
  EXPECT_FALSE(mid.owning());
  EXPECT_FALSE(t.index0(3).ok());
  EXPECT_FALSE(t.index0(-1).ok());
  EXPECT_FALSE(testing::must(HostTensor::from_f32({4}, {v.data(), 4})).index0(0).ok());  // rank 1
  const HostTensor q = testing::must(HostTensor::zeros(DType::kQ8_0, {2, 3, 64}));
  const HostTensor second = testing::must(q.index0(1));
  EXPECT_EQ(second.shape(), (Shape{3, 64}));
  EXPECT_EQ(static_cast<const char*>(second.raw()) - static_cast<const char*>(q.raw()), q.nbytes() / 2);
}

TEST(HostTensor, RefusesBadShapes) {
  Result<HostTensor> neg = HostTensor::zeros(DType::kF32, {2, -3});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().code(), ErrorCode::kInvalidInput);
  // 40 q8_0 elements are not a whole number of 32-element blocks.
  Result<HostTensor> partial = HostTensor::zeros(DType::kQ8_0, {40});
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.error().code(), ErrorCode::kInvalidInput);
  const float x[2] = {1, 2};
  Result<HostTensor> negf = HostTensor::from_f32({-2}, x);
  ASSERT_FALSE(negf.ok());
  EXPECT_EQ(negf.error().code(), ErrorCode::kInvalidInput);
  int storage = 0;
  Result<HostTensor> negb = HostTensor::borrow(DType::kI32, {-1}, &storage, 4);
  ASSERT_FALSE(negb.ok());
  EXPECT_EQ(negb.error().code(), ErrorCode::kInvalidInput);
}

TEST(HostTensor, FromF32AndI32) {
  const std::vector<float> vals = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  Result<HostTensor> t = HostTensor::from_f32({3, 2}, vals);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(std::memcmp(t->raw(), vals.data(), 24), 0);
  Result<std::vector<float>> back = t->to_f32();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, vals);

  const std::vector<int32_t> ints = {-3, 0, 5, 1 << 20};
  Result<HostTensor> i = HostTensor::from_i32({4}, ints);
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->dtype(), DType::kI32);
  EXPECT_EQ(i->data<int32_t>()[3], 1 << 20);
  Result<std::vector<float>> fi = i->to_f32();
  ASSERT_TRUE(fi.ok());
  EXPECT_EQ(*fi, (std::vector<float>{-3.0f, 0.0f, 5.0f, 1048576.0f}));
}

TEST(HostTensor, FromValuesCountMismatch) {
  const std::vector<float> five(5, 1.0f);
  Result<HostTensor> t = HostTensor::from_f32({2, 3}, five);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), ErrorCode::kInvalidInput);
  const std::vector<int32_t> three(3, 1);
  Result<HostTensor> i = HostTensor::from_i32({2}, three);
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.error().code(), ErrorCode::kInvalidInput);
  Result<HostTensor> empty = HostTensor::from_f32({0}, std::span<const float>());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->numel(), 0);
}

TEST(HostTensor, BorrowViewsWithoutCopying) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  Result<HostTensor> t = HostTensor::borrow(DType::kF32, {2, 3}, buf, sizeof buf);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->owning());
  EXPECT_EQ(t->raw(), static_cast<const void*>(buf));
  buf[4] = 40.0f;  // the view sees writes to the borrowed memory
  Result<std::vector<float>> v = t->to_f32();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{0, 1, 2, 3, 40, 5}));
  // More bytes than needed is fine.
  Result<HostTensor> sub = HostTensor::borrow(DType::kF32, {4}, buf, sizeof buf);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->numel(), 4);
}

TEST(HostTensor, BorrowTooFewBytes) {
  float buf[6] = {};
  Result<HostTensor> t = HostTensor::borrow(DType::kF32, {2, 3}, buf, 23);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), ErrorCode::kInvalidInput);
  uint8_t q[68] = {};
  Result<HostTensor> q8 = HostTensor::borrow(DType::kQ8_0, {64}, q, 67);
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.error().code(), ErrorCode::kInvalidInput);
  Result<HostTensor> q8ok = HostTensor::borrow(DType::kQ8_0, {64}, q, 68);
  EXPECT_TRUE(q8ok.ok());
}

TEST(HostTensor, BorrowKeepaliveHoldsTheOwner) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{9, 8, 7, 6});
  std::weak_ptr<std::vector<float>> watch = owner;
  Result<HostTensor> t = HostTensor::borrow(DType::kF32, {2, 2}, owner->data(), 16,
                                            std::shared_ptr<const void>(owner, owner.get()));
  ASSERT_TRUE(t.ok());
  HostTensor view = std::move(*t);
  owner.reset();
  EXPECT_FALSE(watch.expired()) << "the borrowed tensor must keep its owner alive";
  {
    // Copies and derived views hold it too.
    Result<HostTensor> r = view.reshape({4});
    ASSERT_TRUE(r.ok());
    HostTensor flat = std::move(*r);
    view = HostTensor();
    EXPECT_FALSE(watch.expired());
    Result<std::vector<float>> v = flat.to_f32();
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, (std::vector<float>{9, 8, 7, 6}));
  }
  EXPECT_TRUE(watch.expired()) << "the owner is released with the last view";
}

TEST(HostTensor, OwnedDataOutlivesTheFirstHandle) {
  Result<HostTensor> t = HostTensor::from_f32({3}, std::vector<float>{1, 2, 3});
  ASSERT_TRUE(t.ok());
  Result<HostTensor> r = t->reshape({1, 3});
  ASSERT_TRUE(r.ok());
  HostTensor view = std::move(*r);
  t = HostTensor::zeros(DType::kF32, {1});  // drops the original handle
  ASSERT_TRUE(t.ok());
  Result<std::vector<float>> v = view.to_f32();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{1, 2, 3}));
}

TEST(HostTensor, Reshape) {
  Result<HostTensor> t = HostTensor::from_f32({2, 3}, std::vector<float>{0, 1, 2, 3, 4, 5});
  ASSERT_TRUE(t.ok());
  Result<HostTensor> r = t->reshape({3, 1, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(r->strides(), (Shape{2, 2, 1}));
  EXPECT_EQ(r->raw(), t->raw());  // same bytes
  Result<HostTensor> bad = t->reshape({4, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidInput);
  Result<HostTensor> neg = t->reshape({-2, -3});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().code(), ErrorCode::kInvalidInput);
}

TEST(HostTensor, PermuteIsAStridedView) {
  // t[i][j][k] = 100 i + 10 j + k over [2, 3, 4]
  std::vector<float> vals;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) vals.push_back(static_cast<float>(100 * i + 10 * j + k));
  Result<HostTensor> t = HostTensor::from_f32({2, 3, 4}, vals);
  ASSERT_TRUE(t.ok());
  Result<HostTensor> p = t->permute({2, 0, 1});  // p[k][i][j] = t[i][j][k]
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p->strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p->is_contiguous());
  EXPECT_EQ(p->raw(), t->raw());
  Result<std::vector<float>> v = p->to_f32();
  ASSERT_TRUE(v.ok());
  std::vector<float> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(static_cast<float>(100 * i + 10 * j + k));
  EXPECT_EQ(*v, want);
  // A strided view cannot be reshaped in place.
  Result<HostTensor> r = p->reshape({24});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  // Permuting back restores the contiguous layout.
  Result<HostTensor> back = p->permute({1, 2, 0});
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->is_contiguous());
  Result<std::vector<float>> bv = back->to_f32();
  ASSERT_TRUE(bv.ok());
  EXPECT_EQ(*bv, vals);
}

TEST(HostTensor, PermuteRefusals) {
  Result<HostTensor> t = HostTensor::zeros(DType::kF32, {2, 3});
  ASSERT_TRUE(t.ok());
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 2},
        std::vector<int64_t>{-1, 0}, std::vector<int64_t>{0, 1, 2}}) {
    Result<HostTensor> p = t->permute(perm);
    ASSERT_FALSE(p.ok()) << shape_str(perm);
    EXPECT_EQ(p.error().code(), ErrorCode::kInvalidInput);
  }
  Result<HostTensor> q = HostTensor::zeros(DType::kQ8_0, {2, 32});
  ASSERT_TRUE(q.ok());
  Result<HostTensor> qp = q->permute({1, 0});
  ASSERT_FALSE(qp.ok());
  EXPECT_EQ(qp.error().code(), ErrorCode::kUnsupported);
}

TEST(HostTensor, StridedHalfAndIntTypes) {
  // f16 [2, 2] = {1, -2, 0.5, 65504}, transposed -> {1, 0.5, -2, 65504}
  uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x7bff};
  Result<HostTensor> t = HostTensor::borrow(DType::kF16, {2, 2}, h, sizeof h);
  ASSERT_TRUE(t.ok());
  Result<HostTensor> p = t->permute({1, 0});
  ASSERT_TRUE(p.ok());
  Result<std::vector<float>> v = p->to_f32();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{1.0f, 0.5f, -2.0f, 65504.0f}));

  int8_t i8[6] = {-128, 127, 0, 1, -1, 5};  // [3, 2] transposed -> [2, 3]
  Result<HostTensor> ti = HostTensor::borrow(DType::kI8, {3, 2}, i8, sizeof i8);
  ASSERT_TRUE(ti.ok());
  Result<HostTensor> pi = ti->permute({1, 0});
  ASSERT_TRUE(pi.ok());
  Result<std::vector<float>> vi = pi->to_f32();
  ASSERT_TRUE(vi.ok());
  EXPECT_EQ(*vi, (std::vector<float>{-128, 0, -1, 127, 1, 5}));

  uint8_t pred[3] = {1, 0, 1};
  Result<HostTensor> tb = HostTensor::borrow(DType::kBool, {3}, pred, 3);
  ASSERT_TRUE(tb.ok());
  Result<std::vector<float>> vb = tb->to_f32();
  ASSERT_TRUE(vb.ok());
  EXPECT_EQ(*vb, (std::vector<float>{1, 0, 1}));

  uint16_t b[2] = {0x3f80, 0xc040};  // bf16 1, -3
  Result<HostTensor> tbf = HostTensor::borrow(DType::kBF16, {2}, b, 4);
  ASSERT_TRUE(tbf.ok());
  Result<std::vector<float>> vbf = tbf->to_f32();
  ASSERT_TRUE(vbf.ok());
  EXPECT_EQ(*vbf, (std::vector<float>{1.0f, -3.0f}));
}

TEST(HostTensor, ToF32DequantizesQ8_0) {
  BlockQ8_0 blocks[2];
  blocks[0].d = f32_to_f16_bits(0.125f);
  blocks[1].d = f32_to_f16_bits(4.0f);
  for (int i = 0; i < 32; ++i) {
    blocks[0].qs[i] = static_cast<int8_t>(i);
    blocks[1].qs[i] = static_cast<int8_t>(-i);
  }
  Result<HostTensor> t = HostTensor::borrow(DType::kQ8_0, {2, 32}, blocks, sizeof blocks);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->nbytes(), 68);
  Result<std::vector<float>> v = t->to_f32();
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 64u);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ((*v)[i], 0.125f * static_cast<float>(i)) << i;
    EXPECT_EQ((*v)[32 + i], -4.0f * static_cast<float>(i)) << i;
  }
}

TEST(HostTensor, ToF32DequantizesQ4_0) {
  BlockQ4_0 blk;
  blk.d = f32_to_f16_bits(1.0f);
  for (int i = 0; i < 16; ++i) blk.qs[i] = static_cast<uint8_t>(0x9 | (0x7 << 4));  // +1, -1
  Result<HostTensor> t = HostTensor::borrow(DType::kQ4_0, {1, 32}, &blk, sizeof blk);
  ASSERT_TRUE(t.ok());
  Result<std::vector<float>> v = t->to_f32();
  ASSERT_TRUE(v.ok());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ((*v)[i], 1.0f);
    EXPECT_EQ((*v)[16 + i], -1.0f);
  }
}

TEST(HostTensor, DefaultIsEmpty) {
  HostTensor t;
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.nbytes(), 0);
  EXPECT_FALSE(t.owning());
}

}  // namespace
}  // namespace kvf
