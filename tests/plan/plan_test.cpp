// The planner: attention schedules from the device, typed refusals, and an arena that
// reuses memory (it does not grow with the layer count).
#include <gtest/gtest.h>

#include <cmath>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/ops.h"
#include "plan/attention_schedule.h"
#include "plan/gemm_rows_schedule.h"
#include "plan/mask_form.h"
#include "models/model.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf::plan {
namespace {

DeviceCaps two_cores() {
  DeviceCaps c;
  c.cores = 2;
  c.lane_state_bytes = 32 << 10;
  return c;
}

AttentionRequest decode(int64_t hkv, int64_t lk, int64_t dv = 128) {
  AttentionRequest r;
  r.hq = hkv * 4;
  r.hkv = hkv;
  r.lk = lk;
  r.dk = r.dv = dv;
  return r;
}

TEST(AttentionSchedule, DecodeThatLeavesCoresIdleSplitsTheKeys) {
  AttentionRequest r = decode(1, 4096);
  ASSERT_TRUE(choose_attention_schedule(r, two_cores()).ok());
  EXPECT_EQ(r.schedule, AttentionSchedule::kSplitKV);
  EXPECT_EQ(r.chunk, kCpuAttentionPiece);  // one task per key piece of the kernel's fold
  EXPECT_EQ(r.splits, 4096 / kCpuAttentionPiece);
  EXPECT_EQ(r.scratch_floats, r.batch * r.hq * r.splits * (r.dv + 2));
}

TEST(AttentionSchedule, RowsThatFillTheCoresStream) {
  AttentionRequest r = decode(8, 4096);
  ASSERT_TRUE(choose_attention_schedule(r, two_cores()).ok());
  EXPECT_EQ(r.schedule, AttentionSchedule::kStreaming);
  EXPECT_EQ(r.scratch_floats, 0);
}

TEST(AttentionSchedule, PrefillAndShortCachesStream) {
  AttentionRequest prefill = decode(1, 4096);
  prefill.lq = 64;
  ASSERT_TRUE(choose_attention_schedule(prefill, two_cores()).ok());
  EXPECT_EQ(prefill.schedule, AttentionSchedule::kStreaming);
  AttentionRequest tiny = decode(1, kCpuAttentionPiece);  // one key piece: nothing to split
  ASSERT_TRUE(choose_attention_schedule(tiny, two_cores()).ok());
  EXPECT_EQ(tiny.schedule, AttentionSchedule::kStreaming);
}

TEST(AttentionSchedule, LanesAreTheWidestPowerOfTwoWhoseStateFits) {
  DeviceCaps caps = two_cores();
  AttentionRequest r = decode(8, 512, 64);
  caps.lane_state_bytes = (64 + 2) * 4 * 8;  // exactly eight lanes of state
  ASSERT_TRUE(choose_attention_schedule(r, caps).ok());
  EXPECT_EQ(r.lanes, 8);
  caps.lane_state_bytes = 1 << 20;
  ASSERT_TRUE(choose_attention_schedule(r, caps).ok());
  EXPECT_EQ(r.lanes, 64);
}

TEST(AttentionSchedule, StateThatFitsNoLaneIsATypedRefusal) {
  DeviceCaps caps = two_cores();
  caps.lane_state_bytes = 1024;
  AttentionRequest r = decode(8, 512, 512);  // (512 + 2) * 4 bytes > 1024
  Status s = choose_attention_schedule(r, caps);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("AttentionLds"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("1024"), std::string::npos) << s.error().message();
}

TEST(AttentionSchedule, F16KeysOnADeviceWithoutThemAreRefused) {
  DeviceCaps caps = two_cores();
  caps.has_f16_kv = false;
  AttentionRequest r = decode(8, 512);
  r.kv_dtype = DType::kF16;
  Status s = choose_attention_schedule(r, caps);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("KvDtype"), std::string::npos);
}

// A stack of `layers` decode attentions over one-head caches, compiled.
ir::Graph attention_stack(int layers, int64_t cap) {
  ir::Builder b("stack");
  ir::V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  ir::V x = b.constant("x", testing::must(HostTensor::zeros(DType::kF32, {1, 4, 1, 64})));
  for (int l = 0; l < layers; ++l) {
    ir::V kc = b.state(str_cat("k", l), DType::kF32, {1, 1, cap, 64}, ir::StateRole::kKeyCache, l);
    ir::V vc = b.state(str_cat("v", l), DType::kF32, {1, 1, cap, 64}, ir::StateRole::kValueCache, l);
    ir::V kn = b.slice_axis(b.slice_axis(x, 1, 0, 1), 2, 0, 1);
    ir::V out = ir::ops::attention_cached(x, kn, kn, kc, vc, pos, ir::ops::causal_mask(pos, cap),
                                          {.scale = 0.125, .softcap = 0}).out;
    x = x + out;
  }
  b.output("y", x);
  ir::Graph g = testing::must(b.finish());
  return testing::must(compile::run_passes(g, compile::default_passes())).graph;
}

DeviceCaps h200() {
  DeviceCaps c;
  c.target = Target::kCuda;
  c.name = "cuda: H200";
  c.cores = 132;
  c.lane_state_bytes = 227 << 10;
  c.half_compute = true;
  return c;
}

// The GPU splits the keys when its (row, key head, query row) cells cannot fill the 132
// multiprocessors twice, into at most one split per 32 keys of capacity.
TEST(AttentionSchedule, OnTheGpuKeyHeadCellsDecideTheSplits) {
  AttentionRequest one = decode(4, 32768, 64);  // 4 cells: 66 splits fill 264 blocks
  ASSERT_TRUE(choose_attention_schedule(one, h200()).ok());
  EXPECT_EQ(one.schedule, AttentionSchedule::kSplitKV);
  EXPECT_EQ(one.splits, 66);
  EXPECT_EQ(one.scratch_floats, one.hq * one.splits * (one.dv + 2));
  AttentionRequest shortcache = decode(4, 256, 64);  // capacity caps the splits: 8 of 32 keys
  ASSERT_TRUE(choose_attention_schedule(shortcache, h200()).ok());
  EXPECT_EQ(shortcache.splits, 8);
  AttentionRequest batch = decode(4, 32768, 64);
  batch.batch = 66;  // 264 cells fill the device
  ASSERT_TRUE(choose_attention_schedule(batch, h200()).ok());
  EXPECT_EQ(batch.schedule, AttentionSchedule::kStreaming);
  AttentionRequest prefill = decode(4, 4096, 64);
  prefill.lq = 512;
  ASSERT_TRUE(choose_attention_schedule(prefill, h200()).ok());
  EXPECT_EQ(prefill.schedule, AttentionSchedule::kStreaming);
  EXPECT_EQ(prefill.scratch_floats, 0);
}

// A one-query decode over an f16 cache of head width 64 or 128 goes to the tensor cores
// where 16-bit products are allowed; f32 compute, an f32 cache, another width, several
// query rows or a mask per head keep the SIMT kernel.
TEST(AttentionSchedule, GpuDecodeTakesTheTensorCoresWhereHalfProductsAreAllowed) {
  const auto tensor_cores = [](AttentionRequest r, const DeviceCaps& caps) {
    EXPECT_TRUE(choose_attention_schedule(r, caps).ok());
    return r.tensor_cores;
  };
  AttentionRequest r = decode(4, 4096, 64);
  r.kv_dtype = DType::kF16;
  r.mask = MaskKind::kShared;
  r.live_len = true;
  AttentionRequest chosen = r;
  ASSERT_TRUE(choose_attention_schedule(chosen, h200()).ok());
  EXPECT_TRUE(chosen.tensor_cores);
  EXPECT_NE(describe(chosen).find("tensor-cores"), std::string::npos) << describe(chosen);
  r.dk = r.dv = 128;
  EXPECT_TRUE(tensor_cores(r, h200()));
  DeviceCaps f32 = h200();
  f32.half_compute = false;
  EXPECT_FALSE(tensor_cores(r, f32));
  EXPECT_FALSE(tensor_cores(r, two_cores()));
  AttentionRequest other = r;
  other.kv_dtype = DType::kF32;
  EXPECT_FALSE(tensor_cores(other, h200()));
  other = r;
  other.dk = other.dv = 256;
  EXPECT_FALSE(tensor_cores(other, h200()));
  other = r;
  other.lq = 4;
  EXPECT_FALSE(tensor_cores(other, h200()));
  other = r;
  other.mask = MaskKind::kPerHead;
  EXPECT_FALSE(tensor_cores(other, h200()));
}

// One cached prefill of n query rows (4 heads of 64) over a one-head cache of cap keys,
// masked by `mask` (built from the positions and the cap), compiled.
template <class MaskFn>
ir::Graph prefill(int64_t n, int64_t cap, DType kv, MaskFn mask) {
  ir::Builder b("prefill");
  ir::V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  ir::V x = b.constant("x", testing::must(HostTensor::zeros(DType::kF32, {1, 4, n, 64})));
  ir::V kc = b.state("k", kv, {1, 1, cap, 64}, ir::StateRole::kKeyCache, 0);
  ir::V vc = b.state("v", kv, {1, 1, cap, 64}, ir::StateRole::kValueCache, 0);
  ir::V kn = b.slice_axis(x, 1, 0, 1);
  b.output("y", ir::ops::attention_cached(x, kn, kn, kc, vc, pos, mask(pos, cap), {.scale = 0.125, .softcap = 0}).out);
  return testing::must(compile::run_passes(testing::must(b.finish()), compile::default_passes())).graph;
}

ir::V causal(ir::V pos, int64_t cap) { return ir::ops::causal_mask(pos, cap); }

ir::ValueId pos_slot(const ir::Graph& g) {
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].kind == ir::ValueKind::kSlot && g.values[v].slot == ir::Slot::kPos) return static_cast<ir::ValueId>(v);
  }
  return -1;
}

// A copy: callers pass the plan as a temporary.
KernelRequest only_attention(const Plan& p) {
  const KernelRequest* found = nullptr;
  for (const KernelRequest& r : p.requests) {
    if (r.op == ir::OpKind::kAttention) {
      EXPECT_EQ(found, nullptr) << "two attention eqns";
      found = &r;
    }
  }
  EXPECT_NE(found, nullptr);
  return *found;
}

// A model's traced step keeps the causal mask as an operand of its fused attention; the plan
// sees that the mask is the positions' rule and names the positions (for every backend: the
// CPU reads the mask, a GPU tile kernel the positions).
TEST(MaskForm, ATracedStepsCausalMaskIsReadAsItsPositions) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const ir::Graph traced = testing::must(m.trace_step({.n_tokens = 5, .capacity = 16}));
  const ir::Graph g = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
  for (const Plan& p : {testing::must(make_plan(g, h200())), testing::must(make_plan(g, two_cores()))}) {
    int attention = 0;
    for (const KernelRequest& r : p.requests) {
      if (r.op != ir::OpKind::kAttention) continue;
      ++attention;
      EXPECT_EQ(r.attention.causal_pos, pos_slot(p.graph));
      EXPECT_NE(describe(r.attention).find(" causal"), std::string::npos);
    }
    EXPECT_EQ(attention, m.config.n_layers);
  }
}

// What is not the rule t <= pos[i] over keys 0..Lk-1 stays a mask: a window, a strict
// compare, keys counted from 1, a mask whose select gives -inf to the visible keys.
TEST(MaskForm, OtherMasksAreNotCausalPositions) {
  const auto window = [](ir::V pos, int64_t cap) { return ir::ops::sliding_window_mask(pos, cap, 16); };
  const auto strict = [](ir::V pos, int64_t cap) {
    ir::Builder& b = *pos.b;
    ir::V seen = b.compare(ir::ops::key_positions(b, cap), b.reshape(pos, {pos.dim(0), 1}), ir::CmpDir::kLt);
    return b.reshape(b.select(seen, b.literal(0.0), b.literal(-INFINITY)), {1, 1, pos.dim(0), cap});
  };
  const auto from_one = [](ir::V pos, int64_t cap) {
    return ir::ops::span_mask(pos, ir::ops::key_positions(*pos.b, cap) + 1.0, {});
  };
  const auto inverted = [](ir::V pos, int64_t cap) {
    ir::Builder& b = *pos.b;
    ir::V seen = b.compare(ir::ops::key_positions(b, cap), b.reshape(pos, {pos.dim(0), 1}), ir::CmpDir::kLe);
    return b.reshape(b.select(seen, b.literal(-INFINITY), b.literal(0.0)), {1, 1, pos.dim(0), cap});
  };
  EXPECT_EQ(only_attention(testing::must(make_plan(prefill(64, 256, DType::kF16, causal), h200()))).attention.causal_pos,
            pos_slot(prefill(64, 256, DType::kF16, causal)));
  for (const ir::Graph& g : {prefill(64, 256, DType::kF16, window), prefill(64, 256, DType::kF16, strict),
                             prefill(64, 256, DType::kF16, from_one), prefill(64, 256, DType::kF16, inverted)}) {
    const KernelRequest r = only_attention(testing::must(make_plan(g, h200())));
    EXPECT_EQ(r.attention.causal_pos, -1) << describe(r.attention);
    EXPECT_NE(r.kernel, "attention.tiles");
  }
}

// A GPU runs a causal prefill of one sequence with at least kGpuTileRows rows over a dense
// f16 cache on the tensor-core tiles; fewer rows, an f32 cache, a batch of sequences, f32
// compute (--dtype f32) or the CPU keep the other schedules.
TEST(AttentionSchedule, OnTheGpuACausalPrefillOverAnF16CacheRunsOnTiles) {
  EXPECT_EQ(only_attention(testing::must(make_plan(prefill(kGpuTileRows, 256, DType::kF16, causal), h200()))).kernel,
            "attention.tiles");
  EXPECT_NE(only_attention(testing::must(make_plan(prefill(kGpuTileRows - 1, 256, DType::kF16, causal), h200()))).kernel,
            "attention.tiles");
  EXPECT_NE(only_attention(testing::must(make_plan(prefill(kGpuTileRows, 256, DType::kF32, causal), h200()))).kernel,
            "attention.tiles");
  EXPECT_NE(only_attention(testing::must(make_plan(prefill(kGpuTileRows, 256, DType::kF16, causal), two_cores()))).kernel,
            "attention.tiles");
  DeviceCaps f32_compute = h200();
  f32_compute.half_compute = false;
  EXPECT_NE(only_attention(testing::must(make_plan(prefill(kGpuTileRows, 256, DType::kF16, causal), f32_compute))).kernel,
            "attention.tiles");
  AttentionRequest two = only_attention(testing::must(make_plan(prefill(kGpuTileRows, 256, DType::kF16, causal), h200()))).attention;
  two.batch = 2;  // two sequences would share the mask's positions
  ASSERT_TRUE(choose_attention_schedule(two, h200()).ok());
  EXPECT_NE(two.schedule, AttentionSchedule::kTiles);
}

// A transpose that moves only size-1 axes keeps the elements' order: an alias, like a reshape.
TEST(BufferPlan, TransposesOfUnitAxesAreAliases) {
  ir::Builder b("t");
  ir::V x = b.slot(ir::Slot::kToken, DType::kI32, {1, 1, 4, 8});
  ir::V f = b.cast(x, DType::kF32);
  b.output("unit", b.transpose(f, {0, 2, 1, 3}));  // [1, 1, 4, 8] -> [1, 4, 1, 8]
  b.output("real", b.transpose(f, {0, 1, 3, 2}));  // [1, 1, 4, 8] -> [1, 1, 8, 4]
  const ir::Graph g = testing::must(b.finish());
  EXPECT_TRUE(is_alias(g, g.eqns[1]));
  EXPECT_FALSE(is_alias(g, g.eqns[2]));
}

// On the GPU the linears that read one input follow each other (one launch runs them: q, k,
// v), a gated unit over the first two follows them (gate, up, glu), and the plan computes
// the same values; the CPU keeps the compiler's order.
TEST(Plan, OnTheGpuLinearsOfOneInputAreColocated) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const ir::Graph traced = testing::must(m.trace_step({.n_tokens = 3, .capacity = 16}));
  const ir::Graph g = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
  const Plan gpu = testing::must(make_plan(g, h200()));
  const std::vector<ir::Eqn>& eqns = gpu.graph.eqns;
  int groups_of_three = 0, glus_after_two = 0;
  for (size_t i = 0; i + 2 < eqns.size(); ++i) {
    const bool three = eqns[i].op == ir::OpKind::kLinear && eqns[i + 1].op == ir::OpKind::kLinear &&
                       eqns[i + 2].op == ir::OpKind::kLinear && eqns[i + 1].in[0] == eqns[i].in[0] &&
                       eqns[i + 2].in[0] == eqns[i].in[0];
    groups_of_three += three;
    glus_after_two += eqns[i + 2].op == ir::OpKind::kGlu && eqns[i + 2].in[0] == eqns[i].out && eqns[i + 2].in[1] == eqns[i + 1].out;
  }
  EXPECT_EQ(groups_of_three, m.config.n_layers);
  EXPECT_EQ(glus_after_two, m.config.n_layers);
  for (size_t i = 0; i < eqns.size(); ++i) EXPECT_EQ(gpu.graph.value(eqns[i].out).producer, static_cast<int>(i));
  const Plan cpu = testing::must(make_plan(g, two_cores()));
  EXPECT_EQ(cpu.graph.eqns.size(), eqns.size());
  bool same_order = true;
  for (size_t i = 0; i < eqns.size(); ++i) same_order = same_order && cpu.graph.eqns[i].out == g.eqns[i].out;
  EXPECT_TRUE(same_order);
  const eval::SlotBindings slots{{ir::Slot::kToken, testing::must(eval::Buffer::i32({3}, {1, 2, 3}))},
                                 {ir::Slot::kPos, testing::must(eval::Buffer::i32({3}, {0, 1, 2}))}};
  EXPECT_EQ(testing::must(testing::run_graph(gpu.graph, slots)).at("logits").data,
            testing::must(testing::run_graph(g, slots)).at("logits").data);
}

TEST(BufferPlan, ArenaDoesNotGrowWithLayersAndScratchIsShared) {
  const Plan two = testing::must(make_plan(attention_stack(2, 4096), two_cores()));
  const Plan six = testing::must(make_plan(attention_stack(6, 4096), two_cores()));
  int split = 0;
  for (const KernelRequest& r : six.requests) split += r.kernel == "attention.split_kv";
  EXPECT_EQ(split, 6) << describe(six);
  EXPECT_EQ(two.buffers.arena_bytes, six.buffers.arena_bytes) << describe(two) << describe(six);
  EXPECT_LT(six.buffers.arena_bytes * 2, six.buffers.naive_bytes);
}

TEST(BufferPlan, ReshapesAndStateUpdatesTakeNoArenaBytes) {
  const Plan p = testing::must(make_plan(attention_stack(1, 256), two_cores()));
  for (size_t i = 0; i < p.graph.eqns.size(); ++i) {
    const ir::Eqn& e = p.graph.eqns[i];
    const bool alias = e.op == ir::OpKind::kReshape ||
                       (e.op == ir::OpKind::kDynamicUpdateSlice && p.graph.value(e.in[0]).kind == ir::ValueKind::kState);
    if (alias) {
      EXPECT_EQ(p.buffers.offset[static_cast<size_t>(e.out)], -1) << "eqn " << i;
      EXPECT_NE(p.buffers.storage_of[static_cast<size_t>(e.out)], e.out) << "eqn " << i;
    }
  }
}

// The GPU runs an RMSNorm inside the linears after it, reading the norm's input while it
// writes their outputs (and the gated unit's or the sum after them): no output of that
// launch may take the input's bytes, the final norm's included, whose input nothing reads
// later.
TEST(BufferPlan, AFusedNormsInputOutlivesTheLinearsThatReadIt) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const ir::Graph traced = testing::must(m.trace_step({.n_tokens = 1, .capacity = 16}));
  const Plan p = testing::must(make_plan(testing::must(compile::run_passes(traced, compile::default_passes())).graph, h200()));
  const std::vector<ir::Eqn>& eqns = p.graph.eqns;
  auto bytes_of = [&](ir::ValueId v) {
    int64_t n = 1;
    for (int64_t d : p.graph.type(v).shape) n *= d;
    return n * static_cast<int64_t>(element_bytes(p.graph.type(v).dtype));
  };
  auto at = [&](ir::ValueId v) { return p.buffers.offset[static_cast<size_t>(p.buffers.storage_of[static_cast<size_t>(v)])]; };
  int norms = 0;
  for (size_t e = 0; e + 1 < eqns.size(); ++e) {
    if (eqns[e].op != ir::OpKind::kRmsNorm || eqns[e + 1].op != ir::OpKind::kLinear || eqns[e + 1].in[0] != eqns[e].out) continue;
    ++norms;
    const ir::ValueId x = eqns[e].in[0];
    for (size_t j = e + 1; j < eqns.size() && j <= e + 4; ++j) {
      const ir::OpKind op = eqns[j].op;
      if (op != ir::OpKind::kLinear && op != ir::OpKind::kGlu && op != ir::OpKind::kAdd) break;
      const ir::ValueId y = eqns[j].out;
      const bool apart = at(y) + bytes_of(y) <= at(x) || at(x) + bytes_of(x) <= at(y);
      EXPECT_TRUE(apart) << "eqn " << j << " over the input of the norm at eqn " << e;
      if (op != ir::OpKind::kLinear) break;
    }
  }
  EXPECT_EQ(norms, 2 * m.config.n_layers + 1);  // attention and FFN norms, and the final one
}

TEST(DeviceCaps, ThisMachineIsMeasured) {
  const DeviceCaps c = cpu_caps();
  EXPECT_GE(c.cores, 1);
  EXPECT_GT(c.l1d_bytes, 0);
  EXPECT_TRUE(c.simd_bytes == 16 || c.simd_bytes == 32 || c.simd_bytes == 64);
  EXPECT_EQ(cpu_caps(3).cores, 3);
  EXPECT_NE(describe(c).find("threads"), std::string::npos);
}

TEST(GemmStreamSchedule, RowsPastTheEveryGroupBoundStreamOnlyGroupsOfSeveralParts) {
  EXPECT_FALSE(gemm_stream_chosen(kGemmStreamMin - 1, 3));  // gemm_rows' rows
  EXPECT_TRUE(gemm_stream_chosen(kGemmStreamMin, 1));
  EXPECT_TRUE(gemm_stream_chosen(kGemmStreamEveryGroupMax, 1));
  EXPECT_FALSE(gemm_stream_chosen(kGemmStreamEveryGroupMax + 1, 1));  // o, down: cuBLASLt
  EXPECT_TRUE(gemm_stream_chosen(kGemmStreamEveryGroupMax + 1, 2));   // gate and up
  EXPECT_TRUE(gemm_stream_chosen(kGemmStreamMax, 3));                 // q, k and v
  EXPECT_FALSE(gemm_stream_chosen(kGemmStreamMax + 1, 3));
}

TEST(GemmStreamSchedule, SplitsFillTheResidentBlocksWithinOneCluster) {
  const ClusterResidency h100 = uniform_residency(132, 2);  // 264 blocks in clusters of 1, 2, 3, 4, 6 or 8
  EXPECT_EQ(h100[3], 264);
  EXPECT_EQ(h100[5], 260);
  // 16 tiles: every split up to a cluster's 8 fits in one wave, and 8 are the shortest.
  EXPECT_EQ(gemm_stream_schedule(16, 5632, h100).splits, kGemmStreamMaxSplits);
  // 88 tiles: 3 splits are 264 blocks, one wave of 11 chunks.
  EXPECT_EQ(gemm_stream_schedule(88, 2048, h100).splits, 3);
  // A short k: no split under kGemmStreamMinSplitChunks chunks (4 chunks of 64: one split).
  EXPECT_EQ(gemm_stream_schedule(16, 256, h100).splits, 1);
  // Tiles past the resident blocks: each split would add waves, not shorten them.
  EXPECT_EQ(gemm_stream_schedule(400, 4096, h100).splits, 1);
}

TEST(GemmStreamSchedule, ATileIsOneHalfWhereTwoHalvesWouldLeavePlacesEmpty) {
  const ClusterResidency h100 = uniform_residency(132, 2);  // 264 blocks in clusters of 8
  // o and down of a 2,048-wide model: 16 two-half tiles split 8 ways are 128 blocks.
  EXPECT_EQ(gemm_stream_halves(16, h100), 1);
  EXPECT_EQ(gemm_stream_halves(32, h100), 1);  // 256 blocks: still 8 places empty
  EXPECT_EQ(gemm_stream_halves(33, h100), 2);  // 264: full
  // A device that cannot place clusters of 8 at all has no places to fill that way.
  ClusterResidency no_eights = h100;
  no_eights[kGemmStreamMaxSplits] = 0;
  EXPECT_EQ(gemm_stream_halves(16, no_eights), 2);
}

TEST(GemmStreamSchedule, ASplitThatSpillsIntoASecondWaveIsNotTaken) {
  // As an H100 places the 64-row kernel: clusters of 3 hold 79 x 3 = 237 blocks, not 264.
  ClusterResidency placed = uniform_residency(132, 2);
  placed[3] = 237;
  // 88 tiles in 3 splits would leave 27 blocks for a second wave: 2 splits, one wave of 16 chunks.
  EXPECT_EQ(gemm_stream_schedule(88, 2048, placed).splits, 2);
  // Clusters the device cannot place are never chosen.
  ClusterResidency small_clusters = uniform_residency(132, 2);
  for (int s = 3; s <= kGemmStreamMaxSplits; ++s) small_clusters[s] = 0;
  EXPECT_EQ(gemm_stream_schedule(16, 5632, small_clusters).splits, 2);
}

}  // namespace
}  // namespace kvf::plan
