// The Oracle::run contract: slot and state binding checks, allocate_state, donation
// publishing only on success, the validation channel, and exact widening of f16 / bf16 /
// q8_0 constants.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "eval/buffers.h"
#include "testing.h"

namespace kvf {
namespace {

using testing::f32;
using testing::i32;

using eval::Buffer;
using eval::Oracle;
using eval::SlotBindings;
using eval::StateStore;
using ir::Builder;
using ir::CmpDir;
using ir::Slot;
using ir::V;
using testing::expect_buf;
using testing::mentions;

constexpr double kInf = std::numeric_limits<double>::infinity();

ir::Graph finish(Builder& b) {
  Result<ir::Graph> g = b.finish();
  if (!g) {
    ADD_FAILURE() << g.error().to_string();
    return ir::Graph{};
  }
  return std::move(*g);
}

// Same names, dtypes, shapes and bytes.
void expect_same_store(const StateStore& got, const StateStore& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    const Buffer& g = it->second;
    EXPECT_EQ(g.dtype, w.dtype) << name;
    EXPECT_EQ(g.shape, w.shape) << name;
    ASSERT_EQ(g.data.size(), w.data.size()) << name;
    EXPECT_EQ(std::memcmp(g.data.data(), w.data.data(), w.data.size() * sizeof(double)), 0) << name << " bytes changed";
  }
}

// ---------------------------------------------------------------- slots

// out = pos + 1 over slot pos i32[2].
ir::Graph pos_plus_one() {
  Builder b("slots");
  b.output("out", b.slot(Slot::kPos, DType::kI32, {2}) + 1.0);
  return finish(b);
}

TEST(OracleRun, BoundSlotIsRead) {
  const ir::Graph g = pos_plus_one();
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kPos, i32({2}, {4, -1})}}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  expect_buf(r->at("out"), DType::kI32, {2}, {5, 0});
}

TEST(OracleRun, MissingSlotIsInvalidInputNamingIt) {
  const ir::Graph g = pos_plus_one();
  StateStore state;
  // a binding for another slot does not help
  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kToken, i32({2}, {0, 0})}}, state);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "pos")) << r.error().message();
}

TEST(OracleRun, SlotWithWrongShapeOrDtypeIsInvalidInput) {
  const ir::Graph g = pos_plus_one();
  StateStore state;
  for (const Buffer& bad : {i32({3}, {1, 2, 3}), i32({2, 1}, {1, 2}), f32({2}, {1, 2}), i32({}, {1})}) {
    Result<eval::Outputs> r = Oracle().run(g, {{Slot::kPos, bad}}, state);
    ASSERT_FALSE(r.ok()) << dtype_name(bad.dtype) << shape_str(bad.shape);
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
    EXPECT_TRUE(mentions(r.error(), "pos")) << r.error().message();
  }
}

// ---------------------------------------------------------------- state

TEST(OracleRun, MissingStateIsInvalidInputNamingIt) {
  Builder b("st");
  b.output("out", b.state("kcache", DType::kF32, {2, 2}) * 2.0);
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "kcache")) << r.error().message();
  EXPECT_TRUE(state.empty());

  state["kcache"] = f32({3, 2}, {0, 0, 0, 0, 0, 0});  // wrong shape
  Result<eval::Outputs> r2 = Oracle().run(g, {}, state);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code(), ErrorCode::kInvalidInput) << r2.error().to_string();
  state["kcache"] = i32({2, 2}, {0, 0, 0, 0});  // wrong dtype
  Result<eval::Outputs> r3 = Oracle().run(g, {}, state);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInvalidInput) << r3.error().to_string();
}

TEST(AllocateState, ZeroFillsEveryMissingState) {
  Builder b("alloc");
  V a = b.state("a", DType::kF32, {2, 3});
  V c = b.state("c", DType::kI32, {4});
  V h = b.state("h", DType::kF16, {1, 2});
  b.output("a", a);
  b.output("c", c);
  b.output("h", h);
  const ir::Graph g = finish(b);
  StateStore state;
  Status s = eval::allocate_state(g, state);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  ASSERT_EQ(state.size(), 3u);
  expect_buf(state.at("a"), DType::kF32, {2, 3}, std::vector<double>(6, 0.0));
  expect_buf(state.at("c"), DType::kI32, {4}, std::vector<double>(4, 0.0));
  expect_buf(state.at("h"), DType::kF16, {1, 2}, {0, 0});

  // existing entries are kept as they are
  StateStore kept;
  kept["a"] = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Status s2 = eval::allocate_state(g, kept);
  ASSERT_TRUE(s2.ok()) << s2.error().to_string();
  ASSERT_EQ(kept.size(), 3u);
  expect_buf(kept.at("a"), DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_buf(kept.at("c"), DType::kI32, {4}, {0, 0, 0, 0});
}

// ---------------------------------------------------------------- donation

TEST(Donation, WritesBackOnlyOnSuccess) {
  // s f32[3]; out = s * 2; s <- s + cast(pos[0..3], f32)
  Builder b("donate");
  V s = b.state("s", DType::kF32, {3});
  V pos = b.slot(Slot::kPos, DType::kI32, {3});
  b.output("out", s * 2.0);
  b.donate(s, s + b.cast(pos, DType::kF32));
  const ir::Graph g = finish(b);
  StateStore state;
  state["s"] = f32({3}, {1, 2, 3});
  Oracle oracle;
  const SlotBindings slots{{Slot::kPos, i32({3}, {10, 20, 30})}};

  Result<eval::Outputs> r = oracle.run(g, slots, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  expect_buf(r->at("out"), DType::kF32, {3}, {2, 4, 6});
  expect_buf(state.at("s"), DType::kF32, {3}, {11, 22, 33});

  Result<eval::Outputs> r2 = oracle.run(g, slots, state);  // reads the published state
  ASSERT_TRUE(r2.ok()) << r2.error().to_string();
  expect_buf(r2->at("out"), DType::kF32, {3}, {22, 44, 66});
  expect_buf(state.at("s"), DType::kF32, {3}, {21, 42, 63});

  const StateStore before = state;
  Result<eval::Outputs> r3 = oracle.run(g, {}, state);  // slot missing: nothing published
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInvalidInput);
  expect_same_store(state, before);
}

TEST(Donation, SwappedStatesReadOldValues) {
  // a <- b and b <- a in one step: both must see the values from before the step.
  Builder b("swap");
  V a = b.state("a", DType::kF32, {2});
  V c = b.state("c", DType::kF32, {2});
  b.donate(a, c);
  b.donate(c, a);
  b.output("sum", a + c);
  const ir::Graph g = finish(b);
  StateStore state;
  state["a"] = f32({2}, {1, 2});
  state["c"] = f32({2}, {30, 40});
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  expect_buf(r->at("sum"), DType::kF32, {2}, {31, 42});
  expect_buf(state.at("a"), DType::kF32, {2}, {30, 40});
  expect_buf(state.at("c"), DType::kF32, {2}, {1, 2});
}

// ---------------------------------------------------------------- validation and eval errors

// cache f32[4,2] <- dynamic_update_slice(cache, [7,8], pos, axis 0), witness pos < 2.
ir::Graph guarded_write() {
  Builder b("guarded");
  V cache = b.state("cache", DType::kF32, {4, 2});
  V pos = b.slot(Slot::kPos, DType::kI32, {1});
  Result<HostTensor> row = HostTensor::from_f32({1, 2}, std::vector<float>{7, 8});
  if (!row) ADD_FAILURE() << row.error().to_string();
  V upd = b.constant("row", std::move(*row));
  V next = b.dynamic_update_slice(cache, upd, pos, 0);
  b.validate(b.compare(pos, b.literal(2, DType::kI32), CmpDir::kLt), "pos < 2");
  b.donate(cache, next);
  b.output("next", next);
  return finish(b);
}

StateStore filled_cache() {
  StateStore state;
  state["cache"] = f32({4, 2}, {0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4});
  return state;
}

TEST(Validation, FalseWitnessPublishesNothing) {
  const ir::Graph g = guarded_write();
  StateStore state = filled_cache();
  const StateStore before = state;
  // pos 3: the write itself fits (3 + 1 <= 4), only the witness fails
  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kPos, i32({1}, {3})}}, state);
  ASSERT_FALSE(r.ok()) << "a false witness must not return outputs";
  EXPECT_EQ(r.error().code(), ErrorCode::kValidation) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "pos < 2")) << r.error().message();
  expect_same_store(state, before);
}

TEST(Validation, TrueWitnessPublishes) {
  const ir::Graph g = guarded_write();
  StateStore state = filled_cache();
  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kPos, i32({1}, {1})}}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const std::vector<double> want{0.5, 1, 7, 8, 2.5, 3, 3.5, 4};
  expect_buf(r->at("next"), DType::kF32, {4, 2}, want);
  expect_buf(state.at("cache"), DType::kF32, {4, 2}, want);
}

TEST(Validation, OneFalseElementOfAVectorWitnessFails) {
  Builder b("vec");
  V s = b.state("s", DType::kF32, {3});
  V tok = b.slot(Slot::kToken, DType::kI32, {3});
  b.validate(b.compare(tok, b.literal(0, DType::kI32), CmpDir::kGe), "tokens are non-negative");
  b.donate(s, s + 1.0);
  const ir::Graph g = finish(b);
  StateStore state;
  state["s"] = f32({3}, {1, 2, 3});
  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kToken, i32({3}, {0, 5, -1})}}, state);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kValidation) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "element 2")) << r.error().message();
  expect_buf(state.at("s"), DType::kF32, {3}, {1, 2, 3});
}

TEST(OracleRun, EvalErrorLeavesStateUnchanged) {
  // rows = table[token]; cache <- dynamic_update_slice(cache, rows, pos, axis 0)
  Builder b("evalerr");
  V cache = b.state("cache", DType::kF32, {4, 2});
  V tok = b.slot(Slot::kToken, DType::kI32, {2});
  V pos = b.slot(Slot::kPos, DType::kI32, {1});
  Result<HostTensor> t = HostTensor::from_f32({3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(t.ok());
  V next = b.dynamic_update_slice(cache, b.gather(b.constant("table", std::move(*t)), tok), pos, 0);
  b.donate(cache, next);
  b.output("next", next);
  const ir::Graph g = finish(b);
  StateStore state = filled_cache();
  const StateStore before = state;

  Result<eval::Outputs> r = Oracle().run(g, {{Slot::kToken, i32({2}, {0, 3})}, {Slot::kPos, i32({1}, {0})}}, state);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_TRUE(mentions(r.error(), "index 3")) << r.error().message();
  expect_same_store(state, before);

  Result<eval::Outputs> r2 = Oracle().run(g, {{Slot::kToken, i32({2}, {0, 2})}, {Slot::kPos, i32({1}, {3})}}, state);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code(), ErrorCode::kCapacity) << r2.error().to_string();
  expect_same_store(state, before);

  Result<eval::Outputs> r3 = Oracle().run(g, {{Slot::kToken, i32({2}, {2, 0})}, {Slot::kPos, i32({1}, {2})}}, state);
  ASSERT_TRUE(r3.ok()) << r3.error().to_string();
  expect_buf(state.at("cache"), DType::kF32, {4, 2}, {0.5, 1, 1.5, 2, 5, 6, 1, 2});
}

// ---------------------------------------------------------------- constants

TEST(Constant, F16WidenedExactly) {
  // 1, -2, 0.5, 65504 (max), 2^-24 (smallest subnormal), 0x3555 = 1.3330078125 / 4, -0, +inf
  const std::vector<uint16_t> bits{0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001, 0x3555, 0x8000, 0x7C00};
  Result<HostTensor> t = HostTensor::borrow(DType::kF16, {2, 4}, bits.data(), 16);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  Builder b("f16");
  V h = b.constant("h", std::move(*t));
  b.output("h", h);
  b.output("h32", b.cast(h, DType::kF32));
  b.output("twice", h + h);
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double tiny = std::ldexp(1.0, -24);
  const std::vector<double> want{1, -2, 0.5, 65504, tiny, 0.333251953125, -0.0, kInf};
  expect_buf(r->at("h"), DType::kF16, {2, 4}, want);
  expect_buf(r->at("h32"), DType::kF32, {2, 4}, want);
  // native f16 arithmetic: 2 * 65504 = 131008 overflows f16 to inf; 2 * 2^-24 is still a subnormal
  expect_buf(r->at("twice"), DType::kF16, {2, 4}, {2, -4, 1, kInf, 2 * tiny, 0.66650390625, -0.0, kInf});
}

TEST(Constant, BF16WidenedExactly) {
  // 1, -3, 0.15625, 255 * 2^120 (max finite), 171/512, -inf, 2^-133 (smallest subnormal)
  const std::vector<uint16_t> bits{0x3F80, 0xC040, 0x3E20, 0x7F7F, 0x3EAB, 0xFF80, 0x0001};
  Result<HostTensor> t = HostTensor::borrow(DType::kBF16, {7}, bits.data(), 14);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  Builder b("bf16");
  V h = b.constant("w", std::move(*t));
  b.output("w", h);
  b.output("w32", b.cast(h, DType::kF32));
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const std::vector<double> want{1, -3, 0.15625, std::ldexp(255.0, 120), 0.333984375, -kInf, std::ldexp(1.0, -133)};
  expect_buf(r->at("w"), DType::kBF16, {7}, want);
  expect_buf(r->at("w32"), DType::kF32, {7}, want);
}

TEST(Constant, Q8_0WidenedExactly) {
  // block 0: d = 0.5 (0x3800), q[i] = i - 16; block 1: d = 0x2E66 = 1.599609375 / 16, q = -128, 127, 2, 3, ...
  std::vector<BlockQ8_0> blocks(2);
  blocks[0].d = 0x3800;
  blocks[1].d = 0x2E66;
  for (int i = 0; i < 32; ++i) {
    blocks[0].qs[i] = static_cast<int8_t>(i - 16);
    blocks[1].qs[i] = static_cast<int8_t>(i == 0 ? -128 : i == 1 ? 127 : i);
  }
  Result<HostTensor> t = HostTensor::borrow(DType::kQ8_0, {2, 32}, blocks.data(), 68);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  Builder b("q8");
  b.output("w", b.constant("w", std::move(*t)));
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double d1 = 0.0999755859375;
  std::vector<double> want;
  for (int i = 0; i < 32; ++i) want.push_back(0.5 * (i - 16));
  for (int i = 0; i < 32; ++i) want.push_back(d1 * (i == 0 ? -128 : i == 1 ? 127 : i));
  expect_buf(r->at("w"), DType::kF32, {2, 32}, want);
}

TEST(Constant, StridedViewOfSameBytesIsNotConfusedWithTheOriginal) {
  // w and its transpose share data pointer, dtype and shape; only the strides differ.
  const std::vector<float> w{1, 2, 3, 4};
  Result<HostTensor> t = HostTensor::borrow(DType::kF32, {2, 2}, w.data(), 16);
  ASSERT_TRUE(t.ok());
  Result<HostTensor> tt = t->permute({1, 0});
  ASSERT_TRUE(tt.ok());
  Builder b("views");
  b.output("w", b.constant("w", *t));
  b.output("wt", b.constant("wt", std::move(*tt)));
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  expect_buf(r->at("w"), DType::kF32, {2, 2}, {1, 2, 3, 4});
  expect_buf(r->at("wt"), DType::kF32, {2, 2}, {1, 3, 2, 4});
}

TEST(Constant, I32WidenedExactlyAlsoThroughAStridedView) {
  // 2^24 + 1 and 2^31 - 1 are not floats: an i32 constant must not pass through f32.
  const std::vector<int32_t> v{16777217, -7, 2147483647, -2147483647 - 1};
  Result<HostTensor> t = HostTensor::borrow(DType::kI32, {2, 2}, v.data(), 16);
  ASSERT_TRUE(t.ok());
  Result<HostTensor> tt = t->permute({1, 0});
  ASSERT_TRUE(tt.ok());
  Builder b("i32c");
  b.output("x", b.constant("x", *t));
  b.output("xt", b.constant("xt", std::move(*tt)));
  const ir::Graph g = finish(b);
  StateStore state;
  Result<eval::Outputs> r = Oracle().run(g, {}, state);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  expect_buf(r->at("x"), DType::kI32, {2, 2}, {16777217, -7, 2147483647, -2147483648.0});
  expect_buf(r->at("xt"), DType::kI32, {2, 2}, {16777217, 2147483647, -7, -2147483648.0});
}

}  // namespace
}  // namespace kvf
