// The validations a GPU step checks on the host (exec/step_checks.h): the prelude as a graph
// of its own, evaluated from the slot values with the executors' wording, and refused when
// it reads what the host does not hold or is larger than asked.
#include <gtest/gtest.h>

#include "exec/step_checks.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::V;

// pos guarded into [0, 3] before it writes a cache row; the output reads the cache.
ir::Graph guarded_write(bool guard_reads_state) {
  ir::Builder b("guard");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V st = b.state("cache", DType::kF32, {1, 1, 4, 2}, ir::StateRole::kKeyCache, 0);
  V n = ir::ops::index_guard(pos, 0, 3, "0 <= pos <= 3");
  if (guard_reads_state) b.validate(b.compare(b.reduce_sum(st, {0, 1, 2, 3}), b.literal(0.0), ir::CmpDir::kGe), "cache sums >= 0");
  V upd = b.broadcast(b.reshape(b.cast(pos, DType::kF32), {1, 1, 1, 1}) + 1.0, {1, 1, 1, 2});
  V after = b.dynamic_update_slice(st, upd, n, 2);
  b.donate(st, after);
  b.output("out", b.reduce_sum(after, {2, 3}));
  return testing::must(b.finish());
}

TEST(HostValidations, HoldTheGuardAndAnswerAsTheExecutorsDo) {
  const ir::Graph g = guarded_write(false);
  const std::optional<ir::Graph> checks = exec::host_validations(g, 16);
  ASSERT_TRUE(checks.has_value());
  EXPECT_LT(checks->eqns.size(), g.eqns.size());  // the guard's eqns, not the write or the output
  EXPECT_EQ(checks->outputs.size(), g.validations.size());
  for (int32_t pos : {0, 3}) EXPECT_TRUE(exec::check_on_host(g, *checks, {{ir::Slot::kPos, {pos}}}).ok()) << pos;
  for (int32_t pos : {-1, 4, 9}) {
    const Status s = exec::check_on_host(g, *checks, {{ir::Slot::kPos, {pos}}});
    ASSERT_FALSE(s.ok()) << pos;
    EXPECT_EQ(s.error().code(), ErrorCode::kValidation);
    EXPECT_EQ(s.error().message(), "guard: 0 <= pos <= 3 does not hold (element 0)");
  }
}

TEST(HostValidations, AreRefusedWhenTheyReadStateOrTooMuch) {
  EXPECT_FALSE(exec::host_validations(guarded_write(true), 1 << 14).has_value());  // the cache lives on the device
  ir::Builder b("wide");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {64});
  b.validate(b.compare(pos, b.like(pos, 0), ir::CmpDir::kGe), "pos >= 0");
  b.output("out", b.cast(pos, DType::kF32));
  const ir::Graph g = testing::must(b.finish());
  EXPECT_FALSE(exec::host_validations(g, 63).has_value());
  const std::optional<ir::Graph> checks = exec::host_validations(g, 64);
  ASSERT_TRUE(checks.has_value());
  std::vector<int32_t> ps(64, 5);
  EXPECT_TRUE(exec::check_on_host(g, *checks, {{ir::Slot::kPos, ps}}).ok());
  ps[17] = -2;
  const Status s = exec::check_on_host(g, *checks, {{ir::Slot::kPos, ps}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "wide: pos >= 0 does not hold (element 17)");
}

TEST(HostValidations, AGraphWithoutValidationsNeedsNoEqns) {
  ir::Builder b("plain");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {2});
  b.output("out", b.cast(pos, DType::kF32));
  const ir::Graph g = testing::must(b.finish());
  const std::optional<ir::Graph> checks = exec::host_validations(g, 4);
  ASSERT_TRUE(checks.has_value());
  EXPECT_TRUE(checks->eqns.empty());
  EXPECT_TRUE(exec::check_on_host(g, *checks, {{ir::Slot::kPos, {1, 2}}}).ok());
}

}  // namespace
}  // namespace kvf
