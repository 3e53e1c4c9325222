// The shared attention case table (attention_cases.h) on the CPU executor: each case's graph,
// compiled to one Attention eqn, runs on the CPU kernel and on the context-parallel backend
// (decode rows split by owner, chunks by the ring); each agrees with the oracle's run of the traced chain
// (eval/, the definition) and with the plain-loop reference, and gives zeros for a row that
// sees no key.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "exec/context_parallel.h"

namespace kvf {
namespace {

using namespace testing::attention_cases;

class AttentionCasesCpu : public CaseTest {};

TEST_P(AttentionCasesCpu, TheKernelAgreesWithTheOracle) {
  SCOPED_TRACE(str_cat("seed ", seed));
  const Built built = FormBuilder(GetParam(), rng).build();
  EXPECT_EQ(rows_without_keys(built.ref).empty(), !per_row_mask(GetParam().mask)) << "the table's rows that see no key";
  expect_agrees(built, testing::must(run_cpu(built, nullptr)), "cpu kernel");
}

// Context parallel over 2 and 3 ranks of 4-key blocks, so that every case splits its keys:
// a decode row by owner, more query rows by the ring, whose skipped pairs are the causal ones.
TEST_P(AttentionCasesCpu, ContextParallelAgreesWithTheOracle) {
  SCOPED_TRACE(str_cat("seed ", seed));
  const Case& c = GetParam();
  const Built built = FormBuilder(c, rng).build();
  for (int ranks : {2, 3}) {
    auto cp = testing::must(exec::ContextParallelAttention::create(ranks, 4));
    Result<std::vector<float>> got = run_cpu(built, cp.get());
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_agrees(built, *got, str_cat("context parallel over ", ranks, " ranks"));
    EXPECT_EQ(cp->stats().rows, c.batch) << "every batch row ran on the backend";
    EXPECT_EQ(cp->stats().pairs > 0, c.lq > 1) << "the ring runs the rows of a chunk";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCasesCpu, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace kvf
