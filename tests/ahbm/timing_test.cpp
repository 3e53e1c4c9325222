// The timing model pinned to hand calculations: one DMA, two overlapping composites, IPCQ
// back-pressure, and the typed errors for a stuck queue and a composite that pops/branches.
// Defaults: 128 B/cycle per PE DMA, 100-cycle latency; 1024 MACs/cycle, 8-cycle MM drain;
// IPCQ 64 B/cycle per link, 20 cycles per hop.
#include <gtest/gtest.h>

#include "exec/ahbm/composite.h"

namespace kvf::ahbm {
namespace {

Stage dma(int64_t bytes, Cycle* done, Engine& e) {
  return {.op = StageOp::kDma, .name = "dma", .bytes = bytes, .compute = [done, &e] { *done = e.now(); }};
}

TEST(AhbmTiming, OneTileDmaIsLatencyPlusBytesOverBandwidth) {
  Engine e;
  Chip chip(e, HwConfig{});
  CompositeQueue q(chip, chip.pe(0, 0));
  Cycle done = -1;
  Composite c{"one_dma", 0, {}};
  c.stages.push_back(dma(128 * 128 * 2, &done, e));  // one bf16 K tile: 32768 bytes
  ASSERT_TRUE(q.submit(std::move(c), nullptr).ok());
  ASSERT_TRUE(e.run().ok());
  EXPECT_EQ(done, 100 + 32768 / 128);
  EXPECT_EQ(chip.pe(0, 0).dma.busy_cycles(), 256);  // the latency does not hold the engine
}

TEST(AhbmTiming, TwoIndependentCompositesOverlap) {
  Engine e;
  Chip chip(e, HwConfig{});
  CompositeQueue q(chip, chip.pe(0, 0));
  Cycle dma_done[2] = {-1, -1}, done[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    Composite c{"c" + std::to_string(i), i, {}};  // separate streams: no carried state
    c.stages.push_back(dma(32768, &dma_done[i], e));
    c.stages.push_back({.op = StageOp::kMatmul, .name = "mm", .macs = 8 * 128 * 128, .deps = {0}});
    ASSERT_TRUE(q.submit(std::move(c), [&done, i, &e] { done[i] = e.now(); }).ok());
  }
  ASSERT_TRUE(e.run().ok());
  // A: DMA [0,256) + 100 -> 356; MM 128 cycles + 8 drain -> 492.
  EXPECT_EQ(dma_done[0], 356);
  EXPECT_EQ(done[0], 492);
  // B: its DMA queues behind A's on the engine, [256,512) + 100 -> 612, and overlaps A's MM.
  EXPECT_EQ(dma_done[1], 612);
  EXPECT_EQ(done[1], 748);
  EXPECT_LT(done[1], 2 * done[0]);  // serial would be 984
}

TEST(AhbmTiming, CarriedStateOrdersAStream) {
  Engine e;
  Chip chip(e, HwConfig{});
  CompositeQueue q(chip, chip.pe(0, 0));
  std::vector<int> order;
  // The first composite's carried stage waits on a long DMA; the second's is ready at once
  // but must still run after it, as they share the running (m, l, O) registers.
  for (int i = 0; i < 2; ++i) {
    Composite c{"c", 0, {}};
    c.stages.push_back({.op = StageOp::kDma, .name = "dma", .bytes = i == 0 ? 1 << 20 : 0});
    c.stages.push_back({.op = StageOp::kVec, .name = "update", .elems = 64, .deps = {0}, .carried = true,
                        .compute = [&order, i] { order.push_back(i); }});
    ASSERT_TRUE(q.submit(std::move(c), nullptr).ok());
  }
  ASSERT_TRUE(e.run().ok());
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
}

TEST(AhbmTiming, FullQueueBackPressuresTheSender) {
  HwConfig hw;
  hw.ipcq.depth = 1;
  Engine e;
  Chip chip(e, hw);
  Pe& a = chip.pe_at(0, 0, 0);
  Pe& b = chip.pe_at(0, 0, 1);  // east of a
  Cycle delivered[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) chip.push(a, b, Message{i, 4160, {}}, [&delivered, i, &e] { delivered[i] = e.now(); });
  e.at(1000, [&b] { EXPECT_EQ(b.inq[static_cast<size_t>(Dir::kWest)].pop().from, 0); });
  ASSERT_TRUE(e.run().ok());
  EXPECT_EQ(delivered[0], 65 + 20);          // 4160 B at 64 B/cycle, then one hop
  EXPECT_EQ(delivered[1], 1000 + 65 + 20);   // waited for the credit the pop freed
  EXPECT_EQ(chip.traffic().stall_cycles, 1000);
  EXPECT_TRUE(chip.check_no_blocked_senders().ok());
}

TEST(AhbmTiming, StuckQueueIsATypedDeadlock) {
  HwConfig hw;
  hw.ipcq.depth = 1;
  Engine e;
  Chip chip(e, hw);
  for (int i = 0; i < 2; ++i) chip.push(chip.pe_at(0, 0, 0), chip.pe_at(0, 1, 0), Message{i, 64, {}}, [] {});
  ASSERT_TRUE(e.run().ok());  // nothing left to run, but the second sender still waits
  Status s = chip.check_no_blocked_senders();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
  EXPECT_NE(s.error().message().find("deadlock"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("north queue of cube 0 pe 4 (1,0)"), std::string::npos) << s.error().message();
}

TEST(AhbmTiming, CompositesMayNotPopOrBranch) {
  Engine e;
  Chip chip(e, HwConfig{});
  CompositeQueue q(chip, chip.pe(0, 0));
  for (StageOp op : {StageOp::kPop, StageOp::kBranch}) {
    Composite c{"bad", 0, {}};
    c.stages.push_back({.op = StageOp::kDma, .name = "dma", .bytes = 64});
    c.stages.push_back({.op = op, .name = "wait", .deps = {0}});
    Status s = q.submit(std::move(c), nullptr);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
    EXPECT_NE(s.error().message().find(stage_op_name(op)), std::string::npos);
  }
  EXPECT_EQ(q.submitted(), 0);
  Composite forward{"forward", 0, {{.op = StageOp::kVec, .name = "v", .deps = {1}}, {.op = StageOp::kVec, .name = "w"}}};
  Status s = validate(forward);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
  Composite early_push{"early_push", 0, {{.op = StageOp::kPush, .name = "p"}, {.op = StageOp::kVec, .name = "w"}}};
  s = validate(early_push);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace kvf::ahbm
