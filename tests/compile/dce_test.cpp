// dce: eqns nothing needs go with the leaves only they read; outputs, donated cache writes
// and validation guards are roots and stay, with the same results and the same failures.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
using testing::must;

ir::Graph dce(const ir::Graph& g) { return must(compile::dce_pass().run(g)); }

bool has_constant(const ir::Graph& g, const std::string& name) {
  for (const ir::Value& v : g.values) {
    if (v.kind == ir::ValueKind::kConstant && v.name == name) return true;
  }
  return false;
}

TEST(Dce, DropsDeadChainsAndTheLeavesOnlyTheyRead) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  ir::Builder b("dead");
  const V x = testing::input(b, "x", testing::random_buffer(rng, {4, 3}));
  const V y = testing::input(b, "y", testing::random_buffer(rng, {4, 3}));
  const V live = b.unary(OpKind::kExp, x);
  const V dead = b.unary(OpKind::kLog, b.unary(OpKind::kAbs, y)) * 3.0;  // nothing reads it
  (void)dead;
  b.output("out", live + 1.0);
  const ir::Graph g = must(b.finish());
  const ir::Graph d = dce(g);
  EXPECT_EQ(g.eqns.size(), 5u);
  EXPECT_EQ(d.eqns.size(), 2u) << ir::print(d);
  EXPECT_TRUE(has_constant(d, "x"));
  EXPECT_FALSE(has_constant(d, "y"));
  testing::expect_same_outputs(g, d);
}

// A step that writes a cache at pos and guards pos, and outputs neither: both are roots.
ir::Graph guarded_write(const eval::Buffer& upd) {
  ir::Builder b("write");
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  const V cache = b.state("cache", DType::kF32, {6, 2});
  const V in_range = b.binary(OpKind::kAnd, b.compare(pos, b.like(pos, 0.0), ir::CmpDir::kGe),
                              b.compare(pos, b.like(pos, 3.0), ir::CmpDir::kLe));
  b.validate(in_range, "0 <= pos <= 3");
  const V written = b.dynamic_update_slice(cache, testing::input(b, "upd", upd), pos, 0);
  b.donate(cache, written);
  b.unary(OpKind::kExp, b.reduce_sum(written, {0}));  // dead: nothing reads it
  b.output("pos_plus_one", pos + b.like(pos, 1.0));
  return must(b.finish());
}

TEST(Dce, KeepsDonationsAndValidationWitnesses) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const ir::Graph g = guarded_write(testing::random_buffer(rng, {2, 2}));
  const ir::Graph d = dce(g);
  EXPECT_EQ(d.eqns.size(), g.eqns.size() - 2) << ir::print(d);
  ASSERT_EQ(d.donations.size(), 1u);
  ASSERT_EQ(d.validations.size(), 1u);
  for (int32_t p : {0, 3}) {
    eval::StateStore sa, sd;
    ASSERT_TRUE(eval::allocate_state(g, sa).ok());
    sa.at("cache") = testing::random_buffer(rng, {6, 2});
    sd = sa;
    const eval::SlotBindings slots{{ir::Slot::kPos, must(eval::Buffer::i32({1}, {p}))}};
    eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
    const eval::Outputs oa = must(oracle.run(g, slots, sa));
    const eval::Outputs od = must(oracle.run(d, slots, sd));
    EXPECT_EQ(oa.at("pos_plus_one").data, od.at("pos_plus_one").data);
    EXPECT_EQ(sa.at("cache").data, sd.at("cache").data);
  }
  // The guard still fails the step (the write itself would fit) and publishes nothing.
  eval::StateStore s;
  ASSERT_TRUE(eval::allocate_state(d, s).ok());
  const eval::StateStore before = s;
  eval::Oracle oracle;
  Result<eval::Outputs> bad = oracle.run(d, {{ir::Slot::kPos, must(eval::Buffer::i32({1}, {4}))}}, s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kValidation);
  EXPECT_EQ(s.at("cache").data, before.at("cache").data);
}

TEST(Dce, LeavesALiveGraphAsItIs) {
  ir::Builder b("live");
  const V x = testing::input(b, "x", must(eval::Buffer::of(DType::kF32, {2}, {1.0, 2.0})));
  b.output("a", b.unary(OpKind::kExp, x));
  b.output("b", b.unary(OpKind::kLog, x));
  const ir::Graph g = must(b.finish());
  EXPECT_EQ(ir::print(dce(g)), ir::print(g));
}

}  // namespace
}  // namespace kvf
