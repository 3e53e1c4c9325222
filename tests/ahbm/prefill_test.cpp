// The prefill kernels end to end: O equals the oracle's causal attention with and without
// SP (the check table, ragged lengths, a chunk continuing a prompt, both shard layouts), the
// skipped and masked tiles are the hand counts, the causal ring skip removes 40-60 % of the
// steps at N = 8, the ring never holds more than two receive buffers, composites never pop
// or branch, and RoPE positions are the global indices the kernel derives from (slot, pe).
#include <gtest/gtest.h>

#include <cmath>

#include "exec/ahbm/check.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf::ahbm {
namespace {

const AttnDims kGroup{.n_heads = 8, .n_kv_heads = 1, .head_dim = 128};  // one KV head, G = 8, d = 128

int64_t stage(const RunTotals& r, StageOp op) { return r.stages[static_cast<size_t>(op)]; }

PrefillReport run(const AhbmConfig& cfg, const GlobalInputs& g, DType storage, int n,
                  ShardLayout layout = ShardLayout::kContiguous, int64_t request_id = 0) {
  return testing::must(run_prefill(cfg, place_prefill(g, g.dims, storage, n, layout, request_id)));
}

TEST(AhbmPrefill, NumericsTableMatchesTheOracle) {
  CheckOptions opts;
  opts.seed = testing::test_seed();
  if (testing::kSanitized) opts.prompts = {7, 300};  // the sanitizer build: ragged against the tile, the ring
  Result<std::vector<CheckRow>> rows = prefill_check(AhbmConfig{}, opts);
  ASSERT_TRUE(rows.ok()) << rows.error().to_string();
  // Per prompt: N = 1 and the contiguous ring for N = 2, 3, 4, 8, plus strided rings at N = 3 and 8;
  // the chunk row runs N = 1 only. Each in f32 and bf16.
  EXPECT_EQ(rows->size(), (opts.prompts.size() * (opts.n_pes.size() + opts.ring_strided.size()) + 1) * 2);
  int rings = 0, chunks = 0;
  for (const CheckRow& r : *rows) {
    EXPECT_TRUE(r.pass) << r.kase << " " << r.layout << " " << dtype_name(r.storage) << " N " << r.n << " context "
                        << r.context << " q_start " << r.q_start << ": rel error " << r.rel_error << " > " << r.tolerance
                        << " (seed " << opts.seed << ")";
    EXPECT_GT(r.cycles, 0);
    rings += r.kase == "prefill-sp" ? 1 : 0;
    chunks += r.q_start > 0 ? 1 : 0;
  }
  EXPECT_EQ(rings, static_cast<int>(opts.prompts.size()) * 6 * 2);
  EXPECT_EQ(chunks, 2);
}

// 300 tokens, tile 128, q_block 4: 75 query blocks (the last is 296..299) against tiles
// 0..127, 128..255, 256..299 (ragged). Tile 1 lies after blocks 0-31 and tile 2 after
// blocks 0-63: 32 + 64 = 96 tiles are never enqueued, 225 - 96 = 129 are. Every block has
// exactly one tile across its diagonal (tile 2 is also the ragged one): 75 masks.
TEST(AhbmPrefill, SkippedAndMaskedTilesAreTheHandCount) {
  AhbmConfig cfg;
  ASSERT_EQ(cfg.kernel.tile, 128);
  ASSERT_EQ(cfg.kernel.q_block, 4);
  const GlobalInputs g = random_global(kGroup, 300, testing::test_seed(), 300);
  const PrefillReport r = run(cfg, g, DType::kF32, 1);
  EXPECT_EQ(r.tiles_skipped, 96);
  EXPECT_EQ(r.tiles, 129);
  EXPECT_EQ(r.composites, 129);
  EXPECT_EQ(r.mask_tiles, 75);
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.steps_skipped, 0);
  // 8 heads x 300 queries x 128 x 4 bytes of Q in and of O out; K and V tile bytes per composite.
  EXPECT_EQ(r.dma_q_bytes, 8 * 300 * 128 * 4);
  EXPECT_EQ(r.dma_o_bytes, r.dma_q_bytes);
  EXPECT_EQ(r.dma_state_bytes, 0);  // one step: the state never leaves SRAM
  EXPECT_LE(rel_error(r.out, testing::must(oracle_prefill(g))), 1e-5);

  // Without GQA batching each of the 8 heads is its own stream: 8 times the tiles and K/V bytes.
  cfg.kernel.gqa_batch = false;
  const PrefillReport single = run(cfg, g, DType::kF32, 1);
  EXPECT_EQ(single.tiles_skipped, 8 * 96);
  EXPECT_EQ(single.tiles, 8 * 129);
  EXPECT_EQ(single.dma_k_bytes, 8 * r.dma_k_bytes);
  EXPECT_LE(rel_error(single.out, std::vector<double>(r.out.begin(), r.out.end())), 1e-6);
}

// A chunk continuing a cached prompt sees the same keys as the tail of the whole prompt.
TEST(AhbmPrefill, ChunkEqualsTheTailOfTheWholePrompt) {
  const GlobalInputs whole = random_global(kGroup, 333, testing::test_seed(), 333);
  GlobalInputs chunk = whole;
  chunk.q_len = 130;
  chunk.q.clear();
  for (int64_t h = 0; h < kGroup.n_heads; ++h) {
    const auto from = whole.q.begin() + (h * 333 + 203) * 128;
    chunk.q.insert(chunk.q.end(), from, from + 130 * 128);
  }
  const PrefillReport w = run(AhbmConfig{}, whole, DType::kF32, 1);
  const PrefillReport c = run(AhbmConfig{}, chunk, DType::kF32, 1);
  EXPECT_LE(rel_error(c.out, testing::must(oracle_prefill(chunk))), 1e-5);
  std::vector<int64_t> last(130);
  for (int64_t i = 0; i < 130; ++i) last[static_cast<size_t>(i)] = 203 + i;
  const std::vector<float> tail = gather_queries(w.out, 8, 333, 128, last);
  EXPECT_LE(rel_error(c.out, std::vector<double>(tail.begin(), tail.end())), 1e-6);
  EXPECT_LT(c.tiles, w.tiles);
}

// Contiguous shards: rank p computes steps 0..p (its diagonal, then the blocks before it) and
// skips the N - 1 - p steps whose block lies after it: 28 of 64 steps at N = 8 (43.75 %).
// Strided shards reach the end of the prompt on every rank: no step is ever skippable.
TEST(AhbmPrefill, CausalRingSkipRemovesNearlyHalfTheSteps) {
  const int64_t len = 600, shard = 75, blocks = 19;  // 8 shards of 75 tokens: one tile, 19 q blocks each
  const GlobalInputs g = random_global(kGroup, len, testing::test_seed(), len);
  const PrefillReport r = run(AhbmConfig{}, g, DType::kBF16, 8);
  EXPECT_EQ(r.steps, 64);
  EXPECT_EQ(r.steps_skipped, 28);
  EXPECT_GE(r.step_skip_fraction(), 0.4);
  EXPECT_LE(r.step_skip_fraction(), 0.6);
  EXPECT_EQ(r.tiles, 36 * blocks);
  EXPECT_LE(rel_error(r.out, testing::must(oracle_prefill(g))), 1e-2);
  // Every block still goes all the way round (N - 1 hops), skipped or not.
  const int64_t block_bytes = 2 * shard * 128 * 2;
  EXPECT_EQ(r.ring_bytes, 8 * 7 * block_bytes);
  EXPECT_EQ(r.ring_entries, 8 * 7 * ((block_bytes + 8191) / 8192));
  EXPECT_EQ(r.max_ring_hops, 1);
  EXPECT_EQ(r.ipcq.max_hops, 1);

  // The skip saves work, not time: rank 7 still computes all 8 steps, as every strided rank
  // does (one-tile shards: a strided tile reaches from the prompt's start to its end, so
  // strided shards skip no tile either).
  const PrefillReport strided = run(AhbmConfig{}, g, DType::kBF16, 8, ShardLayout::kStrided, 5);
  EXPECT_EQ(strided.steps_skipped, 0);
  EXPECT_EQ(strided.tiles_skipped, 0);
  EXPECT_EQ(strided.tiles, 64 * blocks);
  EXPECT_EQ(strided.mm.busy * 36, r.mm.busy * 64);
  EXPECT_NEAR(static_cast<double>(strided.cycles) / static_cast<double>(r.cycles), 1.0, 0.05);
  EXPECT_LE(rel_error(strided.out, std::vector<double>(r.out.begin(), r.out.end())), 1e-2);
}

// Two receive buffers: step t's block comes in only after step t - 2 gave its buffer back.
// A one-entry queue and small entries make the ring back-pressure; values stay exact.
TEST(AhbmPrefill, PingPongHoldsAtMostTwoReceiveBuffers) {
  const GlobalInputs g = random_global(kGroup, 517, testing::test_seed(), 517);
  const std::vector<double> ref = testing::must(oracle_prefill(g));
  const std::vector<int> ranks = testing::kSanitized ? std::vector<int>{3, 8} : std::vector<int>{2, 3, 4, 8};
  for (int n : ranks) {
    AhbmConfig cfg;
    const PrefillReport r = run(cfg, g, DType::kF32, n);
    EXPECT_LE(r.max_recv_buffers, 2) << "N " << n;
    if (n >= 3) {
      EXPECT_EQ(r.max_recv_buffers, 2) << "N " << n << ": the next block should arrive during a step";
    }
    EXPECT_LE(rel_error(r.out, ref), 1e-5) << "N " << n;

    cfg.hw.ipcq.depth = 1;
    cfg.hw.ipcq.entry_bytes = 1024;
    cfg.hw.ipcq.bytes_per_cycle = 4;
    const PrefillReport slow = run(cfg, g, DType::kF32, n);
    EXPECT_LE(slow.max_recv_buffers, 2) << "N " << n;
    EXPECT_GT(slow.ipcq.stall_cycles, 0) << "N " << n;
    EXPECT_EQ(slow.ring_bytes, r.ring_bytes) << "N " << n;
    EXPECT_GT(slow.ring_entries, 7 * r.ring_entries) << "N " << n;  // 1 KiB entries instead of 8 KiB
    EXPECT_LE(rel_error(slow.out, ref), 1e-5) << "N " << n;
  }
}

// Composites only execute: no pop, no branch. Per composite two DMAs (K, V), two MMs and two
// VEC stages (softmax, update), plus a mask stage on masked tiles. Each (step, q block) run
// opens with a Q load (and, past the block's first step, a state reload) and closes with a
// state spill or, on the block's last step, normalize + store. Contiguous shards of 175
// tokens make 44 q blocks per rank; rank p runs steps 0..p.
TEST(AhbmPrefill, CompositesNeverPopOrBranch) {
  const GlobalInputs g = random_global(kGroup, 700, testing::test_seed(), 700);
  for (int n : {1, 4}) {
    const PrefillReport r = run(AhbmConfig{}, g, DType::kBF16, n);
    EXPECT_EQ(stage(r, StageOp::kPop), 0);
    EXPECT_EQ(stage(r, StageOp::kBranch), 0);
    EXPECT_EQ(stage(r, StageOp::kPush), 0);  // the ring moves blocks by kernel pushes, not composite tails
    const int64_t blocks = n == 1 ? 175 : 4 * 44;
    const int64_t runs = n == 1 ? 175 : 44 * (1 + 2 + 3 + 4);
    const int64_t spills = runs - blocks;  // each one a spill and a reload
    EXPECT_EQ(stage(r, StageOp::kMatmul), 2 * r.composites);
    EXPECT_EQ(stage(r, StageOp::kVec), 2 * r.composites + r.mask_tiles + blocks);
    EXPECT_EQ(stage(r, StageOp::kDma), 2 * r.composites + runs + 2 * spills + blocks);
    EXPECT_EQ(r.dma_state_bytes, 2 * spills * 32 * (128 + 2) * 4);
  }
}

// ADR P5: the RoPE position of a key is its global index, which the kernel derives from
// (slot, pe) — never the local slot. Rotating each placed K row by global_of(slot, pe) gives
// the row rotated by its true token index, and the simulator on RoPE'd Q/K equals the oracle
// on the same RoPE'd Q/K.
std::vector<float> rope(const float* x, int64_t d, int64_t pos, const std::vector<float>& inv_freq) {
  std::vector<float> y(x, x + d);
  for (int64_t i = 0; i < d / 2; ++i) {
    const double a = static_cast<double>(pos) * inv_freq[static_cast<size_t>(i)];
    const double x0 = x[i], x1 = x[i + d / 2];
    y[static_cast<size_t>(i)] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
    y[static_cast<size_t>(i + d / 2)] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
  }
  return y;
}

TEST(AhbmPrefill, RopePositionIsTheGlobalIndexFromSlotAndPe) {
  const int64_t d = kGroup.head_dim, len = 77;
  ir::ops::RopeSpec spec;
  spec.head_dim = d;
  const std::vector<float> inv_freq = ir::ops::rope_inv_freq(spec);
  GlobalInputs g = random_global(kGroup, len, testing::test_seed(), len);
  const GlobalInputs raw = g;
  for (int64_t h = 0; h < kGroup.n_heads; ++h)
    for (int64_t i = 0; i < len; ++i) {
      const std::vector<float> q = rope(raw.q.data() + (h * len + i) * d, d, i, inv_freq);
      std::copy(q.begin(), q.end(), g.q.begin() + (h * len + i) * d);
    }
  for (int64_t t = 0; t < len; ++t) {
    const std::vector<float> k = rope(raw.k.data() + t * d, d, t, inv_freq);
    std::copy(k.begin(), k.end(), g.k.begin() + t * d);
  }
  const std::vector<double> ref = testing::must(oracle_prefill(g));
  for (int n : {3, 8}) {
    for (ShardLayout layout : {ShardLayout::kContiguous, ShardLayout::kStrided}) {
      const PrefillInputs in = place_prefill(g, kGroup, DType::kF32, n, layout, 5);
      for (int pe = 0; pe < n; ++pe) {
        const PeShard& s = in.pe[0][static_cast<size_t>(pe)];
        for (int64_t slot = 0; slot < s.kv_len; ++slot) {
          // Which token sits in (pe, slot), found by scanning the raw K, not by the geometry.
          int64_t token = -1;
          for (int64_t t = 0; t < len && token < 0; ++t) {
            if (std::equal(g.k.begin() + t * d, g.k.begin() + (t + 1) * d, s.k.begin() + slot * d)) token = t;
          }
          ASSERT_GE(token, 0) << "pe " << pe << " slot " << slot;
          const int64_t derived = shard_global(in.shards, pe, slot);
          EXPECT_EQ(derived, token) << "pe " << pe << " slot " << slot;
          if (layout == ShardLayout::kStrided) {
            EXPECT_EQ(global_of(in.shards.strided(), pe, slot), token);
          }
          EXPECT_EQ(rope(raw.k.data() + token * d, d, derived, inv_freq),
                    std::vector<float>(s.k.begin() + slot * d, s.k.begin() + (slot + 1) * d));
        }
      }
      const PrefillReport r = testing::must(run_prefill(AhbmConfig{}, in));
      EXPECT_LE(rel_error(r.out, ref), 1e-5) << "N " << n;
    }
  }
}

TEST(AhbmPrefill, SramOverflowIsRefused) {
  AhbmConfig cfg;
  cfg.kernel.q_block = 16;  // 128 rows: 598 KiB at tile 128, prefetch 2 (bf16)
  Result<PrefillReport> r = run_prefill(cfg, place_prefill(random_global(kGroup, 64, 1, 64), kGroup, DType::kBF16, 1,
                                                           ShardLayout::kContiguous, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(r.error().message().find("the prefill kernel needs"), std::string::npos) << r.error().message();
}

TEST(AhbmPrefill, RingOverAChunkIsRefused) {
  Result<PrefillReport> r = run_prefill(AhbmConfig{}, place_prefill(random_global(kGroup, 64, 1, 32), kGroup,
                                                                    DType::kBF16, 1, ShardLayout::kContiguous, 0));
  ASSERT_TRUE(r.ok());
  PrefillInputs in = place_prefill(random_global(kGroup, 64, 1, 64), kGroup, DType::kBF16, 4, ShardLayout::kContiguous, 0);
  in.q_start = 8;
  Result<PrefillReport> ring = run_prefill(AhbmConfig{}, in);
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.error().code(), ErrorCode::kUnsupported);
}

// Prefill is MM-bound once G x q_block rows share a tile: 32 rows cost 1024 MM cycles per
// composite against 512 DMA cycles for its bf16 K and V.
TEST(AhbmPrefill, LongPromptKeepsTheMatrixUnitBusy) {
  AhbmConfig cfg;
  const GlobalInputs g = random_global(AttnDims{.n_heads = 8, .n_kv_heads = 1, .head_dim = 128}, 2048, 3, 2048);
  PrefillInputs in = place_prefill(g, g.dims, DType::kBF16, 1, ShardLayout::kContiguous, 0);
  in.value_heads = 0;  // timing only
  const PrefillReport r = testing::must(run_prefill(cfg, in));
  EXPECT_GT(r.mm.utilization, 0.9);
  EXPECT_LT(r.dma.utilization, 0.7);
}

}  // namespace
}  // namespace kvf::ahbm
