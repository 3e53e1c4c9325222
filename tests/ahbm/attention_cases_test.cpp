// The shared attention case table (attention_cases.h) on the AHBM simulator: every case the
// decode kernel covers (one query row, no split key, no softcap, equal key and value widths,
// no mask or a causal one per batch row) runs a launch per batch row that sees a key and
// agrees with the oracle (eval/); a row that sees no key is zeros without a launch; every
// other case is a kUnsupported refusal, at bind or when the step meets its mask.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "exec/ahbm/attention_target.h"

namespace kvf {
namespace {

using namespace testing::attention_cases;

bool kernel_covers(const Case& c) {
  const bool causal = c.mask == MaskKind::kNone || c.mask == MaskKind::kCausal || c.mask == MaskKind::kNoKeyRow;
  return c.lq == 1 && c.shared == 0 && c.softcap == 0 && c.dk == c.dv && causal;
}

class AttentionCasesAhbm : public CaseTest {};

TEST_P(AttentionCasesAhbm, AgreesWithTheOracleOrRefuses) {
  SCOPED_TRACE(str_cat("seed ", seed));
  const Case& c = GetParam();
  const Built built = FormBuilder(c, rng).build();
  for (int n_pe : {1, 3}) {
    ahbm::TargetOptions t;
    t.n_pe = n_pe;
    t.storage = DType::kF32;  // the PEs hold the keys as the case does: only the sums' order differs
    auto target = testing::must(ahbm::AhbmAttention::create(t));
    Result<std::vector<float>> got = run_cpu(built, target.get());
    if (!kernel_covers(c)) {
      ASSERT_FALSE(got.ok()) << "outside the decode kernel";
      EXPECT_EQ(got.error().code(), ErrorCode::kUnsupported) << got.error().to_string();
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_agrees(built, *got, str_cat("ahbm over ", n_pe, " PEs"));
    const int64_t empty = static_cast<int64_t>(rows_without_keys(built.ref).size()) / c.hq;
    EXPECT_EQ(target->stats().launches, c.batch - empty) << "a launch per batch row that sees a key";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCasesAhbm, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace kvf
