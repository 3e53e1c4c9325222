// all_reduce through the passes: a call every rank of the group makes, so no pass merges two
// (cse), drops one (dce, even one nothing reads) or moves one past another.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
using testing::count_op;
using testing::must;

// The stable names of the graph's all_reduce results, in eqn order.
std::vector<std::string> reduced(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op == OpKind::kAllReduce) out.push_back(g.value(e.out).name);
  }
  return out;
}

// Two all_reduces of one value, one of them unread, and a pair in a chain.
ir::Graph collectives() {
  ir::Builder b("collectives");
  std::mt19937_64 rng(testing::test_seed());
  const V x = testing::input(b, "x", testing::random_buffer(rng, {3, 4}));
  const V first = b.name(b.all_reduce(x), "first");
  const V again = b.name(b.all_reduce(x), "again");
  b.name(b.all_reduce(b.unary(OpKind::kExp, x)), "unread");
  const V chained = b.name(b.all_reduce(first * 2.0), "chained");
  b.output("out", chained + again);
  return must(b.finish());
}

TEST(Collective, CseKeepsEveryAllReduce) {
  const ir::Graph g = collectives();
  const ir::Graph c = must(compile::cse_pass().run(g));
  EXPECT_EQ(count_op(c, OpKind::kAllReduce), 4) << ir::print(c);
}

TEST(Collective, DceKeepsAnAllReduceNothingReads) {
  const ir::Graph g = collectives();
  const ir::Graph d = must(compile::dce_pass().run(g));
  EXPECT_EQ(reduced(d), (std::vector<std::string>{"first", "again", "unread", "chained"})) << ir::print(d);
  EXPECT_EQ(count_op(d, OpKind::kExp), 1);  // the unread all_reduce's operand stays with it
}

TEST(Collective, TheDefaultPipelineKeepsThemInOrder) {
  const ir::Graph g = collectives();
  const compile::Compiled c = must(compile::run_passes(g, compile::default_passes()));
  EXPECT_EQ(reduced(c.graph), (std::vector<std::string>{"first", "again", "unread", "chained"})) << ir::print(c.graph);
}

TEST(Collective, PrintsAsAPrimitiveWithoutParams) {
  ir::Builder b("print");
  const V x = b.slot(ir::Slot::kPos, DType::kI32, {2});
  b.output("out", b.all_reduce(b.cast(x, DType::kF32)));
  const ir::Graph g = must(b.finish());
  EXPECT_NE(ir::print(g).find("  %1:f32[2] = all_reduce %0\n"), std::string::npos) << ir::print(g);
}

}  // namespace
}  // namespace kvf
