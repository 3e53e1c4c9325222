// attention_live: the live-length form. Bad lengths fail through the validation channel
// and publish nothing; valid lengths equal the masked form; NaNs in unused rows stay out.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;

constexpr int64_t kB = 2, kHq = 4, kHkv = 2, kL = 8, kD = 6;
const ops::AttnOpts kOpts{.scale = 0.4, .softcap = 0};

// A decode step over a state cache: writes one new K/V row at pos, then attends over the
// first seq_len keys of each row. Returns the graph and the step's inputs.
struct LiveStep {
  ir::Graph graph;
  Buffer q, k_new, v_new;
};

LiveStep build_live_step(std::mt19937_64& rng) {
  LiveStep s;
  s.q = testing::random_buffer(rng, {kB, kHq, 1, kD});
  s.k_new = testing::random_buffer(rng, {kB, kHkv, 1, kD});
  s.v_new = testing::random_buffer(rng, {kB, kHkv, 1, kD});
  Builder b("live_step");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V len = b.slot(ir::Slot::kSeqLen, DType::kI32, {kB});
  V kc = b.state("k_cache", DType::kF32, {kB, kHkv, kL, kD}, ir::StateRole::kKeyCache, 0);
  V vc = b.state("v_cache", DType::kF32, {kB, kHkv, kL, kD}, ir::StateRole::kValueCache, 0);
  V start = b.slice_axis(pos, 0, 0, 1);
  V k2 = b.dynamic_update_slice(kc, testing::input(b, "k_new", s.k_new), start, 2);
  V v2 = b.dynamic_update_slice(vc, testing::input(b, "v_new", s.v_new), start, 2);
  b.donate(kc, k2);
  b.donate(vc, v2);
  b.output("out", ops::attention_live(testing::input(b, "q", s.q), k2, v2, len, V{}, kOpts));
  s.graph = testing::must(b.finish());
  return s;
}

eval::SlotBindings bindings(int32_t pos, std::vector<int32_t> len) {
  return {{ir::Slot::kPos, testing::must(Buffer::i32({1}, {pos}))},
          {ir::Slot::kSeqLen, testing::must(Buffer::i32({kB}, len))}};
}

// The same attention written as the masked form: additive 0 / -inf mask per row.
Result<Buffer> masked_form(const Buffer& q, const Buffer& k, const Buffer& v, const std::vector<int32_t>& len) {
  std::vector<double> mask;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t j = 0; j < kL; ++j) mask.push_back(j < len[b] ? 0.0 : -std::numeric_limits<double>::infinity());
  Buffer m = testing::must(Buffer::of(DType::kF32, {kB, 1, 1, kL}, mask));
  return testing::eval_expr([&](Builder& b) {
    return ops::attention_prefill(testing::input(b, "q", q), testing::input(b, "k", k), testing::input(b, "v", v),
                                  testing::input(b, "mask", m), kOpts);
  });
}

class AttentionLive : public ::testing::Test {
 protected:
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};
};

TEST_F(AttentionLive, ValidLengthEqualsMaskedForm) {
  SCOPED_TRACE(str_cat("seed ", seed));
  LiveStep s = build_live_step(rng);
  eval::StateStore state;
  state["k_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  state["v_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  eval::Oracle oracle({.precision = eval::Precision::kF64, .threads = 1});
  const std::vector<int32_t> len{4, 8};
  Result<eval::Outputs> out = oracle.run(s.graph, bindings(3, len), state);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  Result<Buffer> want = masked_form(s.q, state["k_cache"], state["v_cache"], len);
  ASSERT_TRUE(want.ok()) << want.error().to_string();
  EXPECT_LE(testing::rel_error(out->at("out").data, want->data), 1e-12);
}

TEST_F(AttentionLive, BadLengthFailsThroughValidationAndPublishesNothing) {
  SCOPED_TRACE(str_cat("seed ", seed));
  LiveStep s = build_live_step(rng);
  eval::StateStore state;
  state["k_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  state["v_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  const eval::StateStore before = state;
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
  for (const std::vector<int32_t>& len : {std::vector<int32_t>{0, 3}, std::vector<int32_t>{3, kL + 1},
                                          std::vector<int32_t>{-1, 2}}) {
    Result<eval::Outputs> out = oracle.run(s.graph, bindings(2, len), state);
    ASSERT_FALSE(out.ok()) << "len " << len[0] << "," << len[1] << " was accepted";
    EXPECT_EQ(out.error().code(), ErrorCode::kValidation) << out.error().to_string();
    EXPECT_EQ(state.at("k_cache").data, before.at("k_cache").data);  // the write at pos was not published
    EXPECT_EQ(state.at("v_cache").data, before.at("v_cache").data);
  }
  // The same step with a valid length does publish the write.
  Result<eval::Outputs> ok = oracle.run(s.graph, bindings(2, {3, 3}), state);
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_NE(state.at("k_cache").data, before.at("k_cache").data);
}

TEST_F(AttentionLive, NanInUnusedRowDoesNotReachOutput) {
  SCOPED_TRACE(str_cat("seed ", seed));
  LiveStep s = build_live_step(rng);
  eval::StateStore clean;
  clean["k_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  clean["v_cache"] = testing::random_buffer(rng, {kB, kHkv, kL, kD});
  eval::StateStore poisoned = clean;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Row 6 of batch 0 and row 7 of batch 1 lie past len = {4, 5}.
  for (int64_t g = 0; g < kHkv; ++g)
    for (int64_t d = 0; d < kD; ++d) {
      poisoned["k_cache"].data[((0 * kHkv + g) * kL + 6) * kD + d] = nan;
      poisoned["v_cache"].data[((1 * kHkv + g) * kL + 7) * kD + d] = nan;
    }
  eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
  Result<eval::Outputs> a = oracle.run(s.graph, bindings(2, {4, 5}), clean);
  Result<eval::Outputs> b = oracle.run(s.graph, bindings(2, {4, 5}), poisoned);
  ASSERT_TRUE(a.ok() && b.ok());
  for (double x : b->at("out").data) ASSERT_FALSE(std::isnan(x));
  EXPECT_EQ(a->at("out").data, b->at("out").data);
  // Why the select matters: the masked form (multiply/add) lets the NaN through.
  Result<Buffer> leaky = masked_form(s.q, poisoned["k_cache"], poisoned["v_cache"], {4, 5});
  ASSERT_TRUE(leaky.ok());
  bool any_nan = false;
  for (double x : leaky->data) any_nan = any_nan || std::isnan(x);
  EXPECT_TRUE(any_nan);
}

TEST_F(AttentionLive, WitnessIsADeclaredValidationOutput) {
  LiveStep s = build_live_step(rng);
  ASSERT_EQ(s.graph.validations.size(), 1u);
  EXPECT_EQ(s.graph.type(s.graph.validations[0].witness), (ir::TensorType{DType::kBool, {kB}}));
}

}  // namespace
}  // namespace kvf
