// The shared attention case table (attention_cases.h) on the CPU executor: each case's graph,
// compiled to one Attention eqn, runs on the CPU kernel and, where a decode step allows it,
// on the context-parallel backend; each agrees with the oracle's run of the traced chain
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

// Context parallel runs decode steps (one query row): those it must take, over 2 and 3 ranks
// of 4-key blocks so that every case splits its keys; a chunk it refuses at bind.
TEST_P(AttentionCasesCpu, ContextParallelAgreesOrRefusesAChunk) {
  SCOPED_TRACE(str_cat("seed ", seed));
  const Case& c = GetParam();
  const Built built = FormBuilder(c, rng).build();
  for (int ranks : {2, 3}) {
    auto cp = testing::must(exec::ContextParallelAttention::create(ranks, 4));
    Result<std::vector<float>> got = run_cpu(built, cp.get());
    if (c.lq != 1) {
      ASSERT_FALSE(got.ok()) << "a chunk of " << c.lq << " query rows";
      EXPECT_EQ(got.error().code(), ErrorCode::kUnsupported) << got.error().to_string();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_agrees(built, *got, str_cat("context parallel over ", ranks, " ranks"));
    EXPECT_EQ(cp->stats().rows, c.batch) << "every batch row ran on the backend";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCasesCpu, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace kvf
