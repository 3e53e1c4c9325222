// all_reduce on the oracle: the ranks' values added in rank order in f64 and rounded once,
// checked against sums worked by hand; a graph with one and no group is refused before
// anything runs; a group of one rank returns x.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "core/collective.h"
#include "eval/oracle.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::V;
using testing::must;

// out = all_reduce(x), x f32 [n] holding `values`.
ir::Graph reduce_of(const std::vector<double>& values) {
  ir::Builder b("reduce");
  const V x = testing::input(b, "x", must(Buffer::of(DType::kF32, {static_cast<int64_t>(values.size())}, values)));
  b.output("out", b.all_reduce(x));
  return must(b.finish());
}

// Rank r runs reduce_of(values[r]) on its own oracle and thread; returns every rank's "out".
std::vector<std::vector<double>> run_ranks(const std::vector<std::vector<double>>& values, eval::Precision precision) {
  const int ranks = static_cast<int>(values.size());
  ThreadGroup group(ranks);
  std::vector<std::vector<double>> out(values.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      eval::Oracle oracle({.precision = precision, .group = &group.rank(r)});
      eval::StateStore state;
      Result<eval::Outputs> o = oracle.run(reduce_of(values[static_cast<size_t>(r)]), {}, state);
      if (!o) {
        group.rank(r).abort();
        ADD_FAILURE() << "rank " << r << ": " << o.error().to_string();
        return;
      }
      out[static_cast<size_t>(r)] = o->at("out").data;
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(AllReduce, SumsByHandOnEveryRank) {
  const std::vector<std::vector<double>> x = {{1, 0.5, -2}, {10, 0.25, 2}, {100, 0.125, -0.0}};
  for (const auto& got : run_ranks(x, eval::Precision::kNative)) EXPECT_EQ(got, (std::vector<double>{111, 0.875, 0}));
}

// 1e8 + 1 - 1e8: f32 additions would lose the 1 (1e8 + 1 rounds to 1e8 in f32); the sum in
// f64, rounded once, keeps it. In kF64 the order shows: 1e16 + 1 - 1e16 loses the 1 (a tie,
// to even), 1e16 - 1e16 + 1 keeps it.
TEST(AllReduce, AddsInRankOrderInF64) {
  for (const auto& got : run_ranks({{1e8}, {1}, {-1e8}}, eval::Precision::kNative)) EXPECT_EQ(got[0], 1.0);
  for (const auto& got : run_ranks({{1e16}, {1}, {-1e16}}, eval::Precision::kF64)) EXPECT_EQ(got[0], 0.0);
  for (const auto& got : run_ranks({{1e16}, {-1e16}, {1}}, eval::Precision::kF64)) EXPECT_EQ(got[0], 1.0);
}

TEST(AllReduce, WithoutAGroupIsRefusedBeforeAnythingRuns) {
  eval::Oracle oracle;
  eval::StateStore state;
  Result<eval::Outputs> o = oracle.run(reduce_of({1, 2}), {}, state);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(o.error().message().find("all_reduce over a group of ranks, and none was given"), std::string::npos)
      << o.error().message();
}

TEST(AllReduce, AGroupOfOneReturnsX) {
  EXPECT_EQ(run_ranks({{3, -0.0, 7.5}}, eval::Precision::kNative)[0], (std::vector<double>{3, -0.0, 7.5}));
}

}  // namespace
}  // namespace kvf
