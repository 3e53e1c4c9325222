// all_reduce on the CPU executor: a small graph with rank-specific weights, compiled and
// planned, run by 2 and 3 ranks on threads, each rank's executor against its oracle; a plan
// with an all_reduce and no group is refused at bind.
#include <gtest/gtest.h>

#include <thread>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "core/collective.h"
#include "exec/cpu/executor.h"
#include "ir/ops.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::V;
using testing::must;

// Rank r's piece of a two-layer product: its x [4, 6] and w [6, 5] are its own; the sums
// meet twice, as after a row-split projection and then a column-split one.
ir::Graph rank_graph(uint64_t seed, int rank) {
  std::mt19937_64 rng(seed + static_cast<uint64_t>(rank));
  ir::Builder b("rank");
  const V x = testing::input(b, "x", testing::random_buffer(rng, {4, 6}));
  const V w = testing::input(b, "w", testing::random_buffer(rng, {6, 5}));
  const V h = b.name(b.all_reduce(b.unary(ir::OpKind::kTanh, x) * 0.5), "h");
  const V y = b.name(b.all_reduce(b.matmul(h, w)), "y");
  b.output("out", y + b.reduce_sum(h, {1}, true));
  return must(b.finish());
}

struct RankResult {
  std::vector<double> oracle;
  std::vector<float> cpu;
};

// One rank: the traced graph on the oracle, then the compiled plan on the CPU executor
// (twice: the second run reads an arena the first left dirty).
Status run_rank(const ir::Graph& g, Collective& group, RankResult& out) {
  eval::Oracle oracle({.group = &group});
  eval::StateStore oracle_state;
  Result<eval::Outputs> o = oracle.run(g, {}, oracle_state);
  if (!o) return o.take_error();
  out.oracle = o->at("out").data;
  Result<compile::Compiled> c = compile::run_passes(g, compile::default_passes());
  if (!c) return c.take_error();
  Result<plan::Plan> p = plan::make_plan(c->graph, plan::cpu_caps(1));
  if (!p) return p.take_error();
  ThreadPool pool(1);
  exec::StateStore state;
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex =
      exec::cpu::CpuExecutor::create(std::move(*p), state, pool, nullptr, exec::cpu::WeightPacking::kPerCall, &group);
  if (!ex) return ex.take_error();
  for (int run = 0; run < 2; ++run) {
    Status s = (*ex)->run({});
    if (!s) return s;
  }
  std::span<const float> got = (*ex)->output("out");
  out.cpu.assign(got.begin(), got.end());
  return {};
}

TEST(AllReduceCpu, RanksOnThreadsMatchTheirOracles) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  for (int ranks : {2, 3}) {
    ThreadGroup group(ranks);
    std::vector<RankResult> results(static_cast<size_t>(ranks));
    std::vector<Status> status(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        Status s = run_rank(rank_graph(seed, r), group.rank(r), results[static_cast<size_t>(r)]);
        if (!s) group.rank(r).abort();
        status[static_cast<size_t>(r)] = std::move(s);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) {
      const RankResult& res = results[static_cast<size_t>(r)];
      ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
      const std::vector<double> cpu(res.cpu.begin(), res.cpu.end());
      EXPECT_LE(testing::rel_error(cpu, res.oracle), 1e-6) << ranks << " ranks, rank " << r;
      // Every rank holds the same sums, bit for bit, on either runner.
      EXPECT_EQ(res.cpu, results[0].cpu) << "rank " << r;
      EXPECT_EQ(res.oracle, results[0].oracle) << "rank " << r;
    }
  }
}

TEST(AllReduceCpu, WithoutAGroupTheBindIsRefused) {
  const ir::Graph g = rank_graph(1, 0);
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = exec::cpu::CpuExecutor::create(must(plan::make_plan(g, plan::cpu_caps(1))), state, pool);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(ex.error().message().find("exec/cpu: graph rank eqn 2 is an all_reduce"), std::string::npos)
      << ex.error().message();
}

}  // namespace
}  // namespace kvf
