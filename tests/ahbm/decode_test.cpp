// The decode kernel end to end: O equals the oracle's attention (the check table), GQA
// batching divides K/V bytes by G, the reduction uses neighbour hops only and never pops
// inside a composite, a lost partial is a typed deadlock, and SRAM overflow is refused.
#include <gtest/gtest.h>

#include "exec/ahbm/check.h"
#include "testing.h"

namespace kvf::ahbm {
namespace {

TEST(AhbmDecode, NumericsTableMatchesTheOracle) {
  CheckOptions opts;
  opts.seed = testing::test_seed();
  if (testing::kSanitized) opts.contexts = {1, 129, 1000};  // the sanitizer build: ragged tails, several tiles a PE
  Result<std::vector<CheckRow>> rows = decode_check(AhbmConfig{}, opts);
  ASSERT_TRUE(rows.ok()) << rows.error().to_string();
  EXPECT_EQ(rows->size(), opts.contexts.size() * opts.n_pes.size() * 2);
  for (const CheckRow& r : *rows) {
    EXPECT_TRUE(r.pass) << dtype_name(r.storage) << " N " << r.n << " context " << r.context << ": rel error "
                        << r.rel_error << " > " << r.tolerance << " (seed " << opts.seed << ")";
    EXPECT_GT(r.cycles, 0);
  }
}

TEST(AhbmDecode, SmallTilesAndDeepPrefetchStayExact) {
  AhbmConfig cfg;
  cfg.kernel.tile = 16;
  cfg.kernel.prefetch = 4;
  const AttnDims dims{.n_heads = 8, .n_kv_heads = 2, .head_dim = 32};
  const GlobalInputs g = random_global(dims, 333, testing::test_seed());
  const std::vector<double> ref = testing::must(oracle_decode(g));
  for (int n : {1, 3, 8}) {
    for (bool batch : {true, false}) {
      cfg.kernel.gqa_batch = batch;
      const DecodeReport r = testing::must(run_decode(cfg, place(g, DType::kF32, n, 5)));
      EXPECT_LE(rel_error(r.out, ref), 1e-5) << "N " << n << " gqa_batch " << batch;
    }
  }
}

TEST(AhbmDecode, GqaBatchingLoadsEachKvTileOnce) {
  AhbmConfig cfg;
  const DecodeInputs in = random_inputs(AttnDims{}, DType::kBF16, 4096, 8, 0, 7);
  const DecodeReport batched = testing::must(run_decode(cfg, in));
  cfg.kernel.gqa_batch = false;
  const DecodeReport single = testing::must(run_decode(cfg, in));
  // 8 KV heads x 4096 tokens x 128 x 2 bytes, once each for K and for V.
  EXPECT_EQ(batched.dma_k_bytes, 8 * 4096 * 128 * 2);
  EXPECT_EQ(batched.dma_v_bytes, batched.dma_k_bytes);
  EXPECT_EQ(single.dma_k_bytes, 8 * batched.dma_k_bytes);
  EXPECT_EQ(single.dma_v_bytes, 8 * batched.dma_v_bytes);
  EXPECT_GT(single.cycles, 4 * batched.cycles);  // decode is KV-load-bound
  EXPECT_LE(rel_error(single.out, std::vector<double>(batched.out.begin(), batched.out.end())), 1e-2);
}

TEST(AhbmDecode, ReductionTreeOverNeighbours) {
  const DecodeInputs in = random_inputs(AttnDims{}, DType::kBF16, 8 * 1000 + 3, 8, 11, 3);
  const DecodeReport r = testing::must(run_decode(AhbmConfig{}, in));
  EXPECT_EQ(r.tree_depth, 3);
  EXPECT_EQ(r.max_edge_hops, 1);
  EXPECT_EQ(r.ipcq.max_hops, 1);
  EXPECT_EQ(r.ipcq.messages, 8 * 7);  // N - 1 partials per KV head
  EXPECT_EQ(r.ipcq.bytes, 8 * 7 * (2 * 8 + 8 * 128) * 4);
  EXPECT_EQ(r.stages[static_cast<size_t>(StageOp::kPop)], 0);
  EXPECT_EQ(r.stages[static_cast<size_t>(StageOp::kBranch)], 0);
  EXPECT_EQ(r.stages[static_cast<size_t>(StageOp::kPush)], 8 * 4);  // the 4 leaves' tail pushes
  EXPECT_EQ(r.mask_tiles, 8 * 8);  // every PE's last tile is ragged (1000 or 1001 tokens, tile 128)
  EXPECT_GT(r.reduction_cycles, 0);
  EXPECT_LE(rel_error(r.out, direct_decode(in)), 1e-2);

  RunOptions naive;
  naive.mapping = Mapping::kNaive;
  const DecodeReport n = testing::must(run_decode(AhbmConfig{}, in, naive));
  EXPECT_EQ(n.max_edge_hops, 2);
  EXPECT_GT(n.ipcq.link_bytes, r.ipcq.link_bytes);
  EXPECT_GT(n.reduction_cycles, r.reduction_cycles);
  EXPECT_LE(rel_error(n.out, std::vector<double>(r.out.begin(), r.out.end())), 1e-6);  // merge order may differ
}

TEST(AhbmDecode, LongContextKeepsTheDmaBusy) {
  AhbmConfig cfg;
  const DecodeInputs in = random_inputs(AttnDims{}, DType::kBF16, 32768, 8, 0, 5);
  const DecodeReport two = testing::must(run_decode(cfg, in));
  EXPECT_GT(two.dma.utilization, 0.9);
  cfg.kernel.prefetch = 1;
  const DecodeReport one = testing::must(run_decode(cfg, in));
  EXPECT_GT(one.cycles, two.cycles);  // ADR §9: prefetch >= 2
}

TEST(AhbmDecode, LostPartialIsATypedDeadlock) {
  AhbmConfig cfg;
  cfg.hw.ipcq.max_spin_polls = 1000;
  RunOptions opts;
  opts.faults.drop_push_of_rank = 0;  // rank 0 never sends to rank 1
  Result<DecodeReport> r = run_decode(cfg, random_inputs(AttnDims{}, DType::kBF16, 512, 8, 0, 1), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInternal);
  EXPECT_NE(r.error().message().find("deadlock"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("pe_id 1"), std::string::npos) << r.error().message();
}

TEST(AhbmDecode, SramOverflowIsRefused) {
  AhbmConfig cfg;
  cfg.kernel.tile = 1024;
  cfg.kernel.prefetch = 4;
  Result<DecodeReport> r = run_decode(cfg, random_inputs(AttnDims{}, DType::kBF16, 64, 1, 0, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(r.error().message().find("SRAM"), std::string::npos);
}

TEST(AhbmDecode, GroupsThatDoNotFitTheCubesAreRefused) {
  AhbmConfig cfg;
  cfg.hw.cubes = 4;  // 8 KV heads x 8 PEs on 4 cubes of 8
  Result<DecodeReport> r = run_decode(cfg, random_inputs(AttnDims{}, DType::kBF16, 64, 8, 0, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCapacity);
}

}  // namespace
}  // namespace kvf::ahbm
