// The GPU decode split rule (plan/decode_splits.h) on the H200's numbers: the choices
// docs/cuda.md and the split sweeps in docs/benchmarks.md describe.
#include <gtest/gtest.h>

#include "plan/decode_splits.h"

namespace kvf::plan {
namespace {

constexpr int kH200Sms = 132;

// Tensor-core kernel, Hq/Hkv 32/8 (one row block per KV head): one block per SM, dense
// caches and paged pools alike.
int tc_splits(int batch, int ctx) { return decode_splits_for(true, 8L * batch, kH200Sms, 0, ctx); }

TEST(DecodeSplits, TensorCoreChoicesOnTheH200) {
  EXPECT_EQ(tc_splits(1, 131072), 16);  // 128 blocks on 132 SMs
  EXPECT_EQ(tc_splits(1, 8192), 16);
  EXPECT_EQ(tc_splits(8, 32768), 2);
  EXPECT_EQ(tc_splits(32, 32768), 1);   // 256 blocks: two rounds, 97%, no merge
}

TEST(DecodeSplits, SimtFillsResidentSlots) {
  // SIMT d128 with 4 rows per block: 3 blocks per SM, 90% of the last wave.
  EXPECT_EQ(decode_splits_for(false, 8, kH200Sms, 3, 131072), 45);
  EXPECT_EQ(decode_splits_for(false, 64, kH200Sms, 3, 32768), 6);
  EXPECT_EQ(decode_splits_for(false, 256, kH200Sms, 3, 32768), 3);
  EXPECT_EQ(decode_splits({8, kH200Sms, 3, 0.9, 131072}), 45);  // the same through the general rule
}

TEST(DecodeSplits, ShortRowsAndDegenerateInputs) {
  EXPECT_EQ(decode_splits({8, kH200Sms, 1, 0.95, 100}), 1);   // chunks of at least 128 keys
  EXPECT_EQ(decode_splits({8, kH200Sms, 1, 0.95, 1000}), 7);  // at most 1000 / 128 splits: the best fill
  EXPECT_EQ(decode_splits({0, 0, 0, 0.95, 0}), 1);            // nothing to split
  EXPECT_EQ(decode_splits({100000, kH200Sms, 1, 0.95, 1 << 20}), 1);  // already many rounds
  EXPECT_EQ(decode_splits_for(false, 8, kH200Sms, 0, 0), 1);  // no residency known, no keys: one split
}

}  // namespace
}  // namespace kvf::plan
