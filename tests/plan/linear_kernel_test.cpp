// Which kernel runs a linear group on a CUDA device (plan/linear_kernel.h): the crossings
// docs/cuda.md describes, and the next best where a kernel cannot take the group.
#include <gtest/gtest.h>

#include "plan/linear_kernel.h"

namespace kvf::plan {
namespace {

using K = LinearKernel;

// What can run a TinyLlama group with 16-bit weights on an H200 with the tensor cores allowed.
const LinearKernels kEvery{K::kGemvOneRow, K::kGemvRegister, K::kGemvBulk, K::kGemvWarps,
                           K::kGemmRows,   K::kGemmStream,   K::kCublasLt, K::kTiles};

LinearKernel pick(int64_t m, int parts, bool norm, LinearKernels can = kEvery) {
  return linear_kernel({.m = m, .parts = parts, .norm = norm}, can);
}

TEST(LinearKernel, DecodeStepOfOneRow) {
  EXPECT_EQ(pick(1, 3, true), K::kGemvOneRow);   // q, k and v behind the attention norm
  EXPECT_EQ(pick(1, 1, false), K::kGemvOneRow);  // o with the residual add
  EXPECT_EQ(pick(1, 2, true), K::kGemvOneRow);   // gate and up
}

TEST(LinearKernel, RowsOfABatchedDecode) {
  EXPECT_EQ(pick(2, 3, true), K::kGemvRegister);  // a fused norm: the register kernel's fewer blocks
  EXPECT_EQ(pick(2, 1, false), K::kGemvBulk);
  EXPECT_EQ(pick(kGemvRegisterMaxRows + 1, 3, true), K::kGemvBulk);
  EXPECT_EQ(pick(kGemmRowsMin - 1, 2, true), K::kGemvBulk);
  EXPECT_EQ(pick(kGemmRowsMin, 2, true), K::kGemmRows);
  EXPECT_EQ(pick(kGemmRowsMax, 1, false), K::kGemmRows);
  EXPECT_EQ(pick(kGemmStreamMin, 1, false), K::kGemmStream);
  EXPECT_EQ(pick(kGemmStreamEveryGroupMax + 1, 1, false), K::kCublasLt);  // o, down
  EXPECT_EQ(pick(kGemmStreamMax, 2, true), K::kGemmStream);                // gate and up
  EXPECT_EQ(pick(kGemmStreamMax + 1, 3, true), K::kCublasLt);
  EXPECT_EQ(pick(4096, 3, true), K::kCublasLt);  // a prefill
}

TEST(LinearKernel, NextBestWhereAKernelCannotRun) {
  LinearKernels can = kEvery;
  can.remove(K::kGemvOneRow);  // a row too wide for the one-row kernel's shared memory
  EXPECT_EQ(pick(1, 3, true, can), K::kGemvRegister);
  EXPECT_EQ(pick(1, 1, false, can), K::kGemvBulk);
  can.remove(K::kGemmRows);  // f32 compute: no tensor cores
  can.remove(K::kGemmStream);
  can.remove(K::kCublasLt);
  EXPECT_EQ(pick(8, 1, false, can), K::kGemvBulk);
  EXPECT_EQ(pick(16, 1, false, can), K::kTiles);
  // f32 weights: only a warp a column, then the tiles.
  const LinearKernels f32{K::kGemvWarps, K::kTiles};
  EXPECT_EQ(pick(1, 3, true, f32), K::kGemvWarps);
  EXPECT_EQ(pick(8, 3, true, f32), K::kGemvWarps);
  EXPECT_EQ(pick(9, 3, true, f32), K::kTiles);
  // Nothing but the tiles, which take anything even when not named.
  EXPECT_EQ(pick(1, 1, false, LinearKernels{}), K::kTiles);
}

TEST(LinearKernel, RowsOutsideAKernelsReachAreNeverItsOwn) {
  // The set says what can take the group's form; the rows are the policy's to check.
  for (int64_t m : {int64_t{2}, int64_t{8}, int64_t{64}}) EXPECT_NE(pick(m, 1, false), K::kGemvOneRow) << m;
  EXPECT_NE(pick(3, 3, true), K::kGemvRegister);
  EXPECT_NE(pick(9, 1, false, {K::kGemvBulk, K::kGemvWarps, K::kTiles}), K::kGemvBulk);
  EXPECT_NE(pick(8, 1, false, {K::kCublasLt, K::kGemvBulk, K::kTiles}), K::kCublasLt);
  EXPECT_NE(pick(4, 1, false, {K::kGemmRows, K::kGemvBulk, K::kTiles}), K::kGemmRows);
}

TEST(LinearKernel, TheKernelsThatTakeARoundedX) {
  for (K k : {K::kGemmRows, K::kCublasLt}) EXPECT_TRUE(takes_rounded_x(k));
  for (K k : {K::kGemvOneRow, K::kGemvRegister, K::kGemvBulk, K::kGemvWarps, K::kGemmStream, K::kTiles}) {
    EXPECT_FALSE(takes_rounded_x(k));
  }
}

TEST(LinearKernels, AddRemoveHas) {
  LinearKernels s;
  EXPECT_FALSE(s.has(K::kTiles));
  s.add(K::kCublasLt);
  s.add(K::kGemvOneRow);
  EXPECT_TRUE(s.has(K::kCublasLt));
  EXPECT_TRUE(s.has(K::kGemvOneRow));
  EXPECT_FALSE(s.has(K::kGemvBulk));
  s.remove(K::kCublasLt);
  EXPECT_FALSE(s.has(K::kCublasLt));
  EXPECT_TRUE(s.has(K::kGemvOneRow));
}

}  // namespace
}  // namespace kvf::plan
