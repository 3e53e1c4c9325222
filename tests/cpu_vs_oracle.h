// A graph run on the oracle and on the CPU executor (through a plan, arena reuse included):
// every output within a relative tolerance. What the kernel tests of fused eqns and the
// executor's primitive tests compare. With two graphs, the oracle runs `reference` (the
// chain as traced) and the executor `run` (what the compiler made of it).
#pragma once

#include <gtest/gtest.h>

#include "exec/cpu/executor.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf::testing {

inline void expect_cpu_matches_oracle(const ir::Graph& reference, const ir::Graph& run, const exec::SlotValues& slots,
                                      double tol) {
  eval::SlotBindings bind;
  for (const auto& [slot, vals] : slots) {
    bind.emplace(slot, must(eval::Buffer::i32({static_cast<int64_t>(vals.size())}, vals)));
  }
  const eval::Outputs ref = must(run_graph(reference, bind, eval::Precision::kNative));
  ThreadPool pool(2);
  exec::StateStore state;
  auto ex = must(exec::cpu::CpuExecutor::create(must(plan::make_plan(run, plan::cpu_caps(2))), state, pool));
  // Poison the arena's outputs by running twice: stale values from run one must not matter.
  for (int run = 0; run < 2; ++run) {
    Status s = ex->run(slots);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
  }
  for (const auto& [name, buf] : ref) {
    std::span<const float> got = ex->output(name);
    ASSERT_EQ(static_cast<int64_t>(got.size()), buf.numel()) << name;
    const std::vector<double> ours(got.begin(), got.end());
    EXPECT_LE(rel_error(ours, buf.data), tol) << name;
  }
}

inline void expect_cpu_matches_oracle(const ir::Graph& g, const exec::SlotValues& slots = {}, double tol = 1e-6) {
  expect_cpu_matches_oracle(g, g, slots, tol);
}

}  // namespace kvf::testing
