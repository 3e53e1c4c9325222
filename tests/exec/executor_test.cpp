// The CPU executor against the oracle: every primitive the executor runs unfused, on random
// inputs, through a plan (arena reuse included); the validation channel; the state it
// updates in place; and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "cpu_vs_oracle.h"
#include "exec/cpu/executor.h"
#include "ir/ops.h"
#include "plan/attention_schedule.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::V;

// Runs g (as traced, not compiled) on the oracle and on the CPU executor; outputs must agree.
void expect_same(const ir::Graph& g, const exec::SlotValues& slots = {}, double tol = 1e-6) {
  testing::expect_cpu_matches_oracle(g, slots, tol);
}

class Primitives : public ::testing::Test {
 protected:
  std::mt19937_64 rng{testing::test_seed()};
  V rand(ir::Builder& b, const std::string& name, Shape s) { return testing::input(b, name, testing::random_buffer(rng, s)); }
};

TEST_F(Primitives, ElementwiseWithBroadcasting) {
  ir::Builder b("ew");
  V x = rand(b, "x", {2, 3, 5}), y = rand(b, "y", {3, 1}), z = rand(b, "z", {5});
  V w = b.unary(ir::OpKind::kExp, x * y - z) / (1.0 + b.unary(ir::OpKind::kTanh, z));
  V m = b.binary(ir::OpKind::kMax, w, b.unary(ir::OpKind::kCos, y));
  V sel = b.select(b.compare(x, y, ir::CmpDir::kLt), m, b.unary(ir::OpKind::kRsqrt, b.unary(ir::OpKind::kAbs, z) + 1.0));
  b.output("out", sel);
  expect_same(testing::must(b.finish()));
}

// The gated units the fusion pass forms (silu, gelu with tanh, gelu with erf), with gates far
// past where exp(-x) overflows or vanishes and an element count that is not a multiple of
// the vector width, against the oracle's own Glu.
TEST_F(Primitives, GatedUnitsMatchTheOracle) {
  for (int act = 0; act < 3; ++act) {
    ir::Builder b("glu");
    V g = rand(b, "g", {3, 1037}) * 100.0, u = rand(b, "u", {3, 1037});
    b.output("out", act == 0 ? ir::ops::swiglu(g, u) : ir::ops::geglu(g, u, act == 1));
    const ir::Graph fused = testing::must(compile::fusion_pass().run(testing::must(b.finish())));
    ASSERT_EQ(testing::count_op(fused, ir::OpKind::kGlu), 1) << act;
    expect_same(fused);
  }
}

// A rope over heads split off a linear's output ([1, T, H, D] transposed to [1, H, T, D]):
// the rope pass has it read the rows in place (token axis -3), both layouts, a partial
// rotary prefix included.
TEST_F(Primitives, RopeReadsHeadsInPlace) {
  for (const ir::ops::RopeLayout layout : {ir::ops::RopeLayout::kHalf, ir::ops::RopeLayout::kInterleaved}) {
    ir::Builder b("rope");
    const V pos = b.slot(ir::Slot::kPos, DType::kI32, {5});
    const ir::ops::RopeSpec spec{.head_dim = 16, .rotary_dim = 12, .theta = 10000.0, .layout = layout, .inv_freq = {}};
    const V x = b.transpose(rand(b, "y", {1, 5, 3, 16}), {0, 2, 1, 3});
    b.output("out", ir::ops::apply_rope(x, ir::ops::rope_tables(pos, spec)));
    const ir::Graph g = testing::must(compile::rope_pass().run(testing::must(b.finish())));
    const ir::Eqn* rope = testing::find_eqn(g, ir::OpKind::kRope);
    ASSERT_NE(rope, nullptr);
    EXPECT_EQ(rope->params.rope.token_axis, -3);
    EXPECT_EQ(g.type(rope->in[0]).shape, (Shape{1, 5, 3, 16}));
    expect_same(g, {{ir::Slot::kPos, {7, 0, 3, 12, 5}}});
  }
}

TEST_F(Primitives, LayoutOps) {
  ir::Builder b("layout");
  V x = rand(b, "x", {2, 3, 4, 5});
  V t = b.transpose(x, {2, 0, 3, 1});                        // [4, 2, 5, 3]
  V s = b.slice(t, {1, 0, 0, 1}, {4, 2, 5, 3}, {2, 1, 2, 1});  // [2, 2, 3, 2]
  V c = b.concat({s, b.broadcast(rand(b, "y", {1, 2, 3, 1}), {2, 2, 3, 2})}, 3);
  V r = b.reshape(c, {4, 12});
  b.output("out", r + b.cast(b.iota({4, 12}, 1), DType::kF32));
  expect_same(testing::must(b.finish()));
}

TEST_F(Primitives, ReductionsOverAnyAxes) {
  ir::Builder b("reduce");
  V x = rand(b, "x", {3, 4, 5});
  b.output("sum02", b.reduce_sum(x, {0, 2}, true));
  b.output("max1", b.reduce_max(x, {1}));
  b.output("sumlast", b.reduce_sum(x, {-1}));
  expect_same(testing::must(b.finish()));
}

TEST_F(Primitives, MatmulWithBroadcastBatch) {
  ir::Builder b("mm");
  V x = rand(b, "x", {2, 1, 3, 8}), y = rand(b, "y", {3, 8, 5});
  b.output("out", b.matmul(x, y));
  expect_same(testing::must(b.finish()));
}

TEST_F(Primitives, GatherFromStoredF16TableIsDequantizedPerRow) {
  ir::Builder b("gather");
  std::vector<float> vals(7 * 6);
  for (float& v : vals) v = static_cast<float>(rng() % 1000) / 100.0f - 5.0f;
  HostTensor f32 = testing::must(HostTensor::from_f32({7, 6}, vals));
  HostTensor f16 = testing::must(HostTensor::zeros(DType::kF16, {7, 6}));
  for (size_t i = 0; i < vals.size(); ++i) f16.data<uint16_t>()[i] = f32_to_f16_bits(vals[i]);
  V table = b.cast(b.constant("table", f16), DType::kF32);
  V tok = b.slot(ir::Slot::kToken, DType::kI32, {3});
  b.output("out", b.gather(table, tok));
  expect_same(testing::must(b.finish()), {{ir::Slot::kToken, {6, 0, 3}}}, 0);
}

TEST_F(Primitives, ScatterAndDynamicUpdateSliceWriteStateInPlace) {
  ir::Builder b("update");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V st = b.state("cache", DType::kF32, {1, 2, 8, 4}, ir::StateRole::kKeyCache, 0);
  V upd = rand(b, "u", {1, 2, 1, 4});
  V after = b.dynamic_update_slice(st, upd, pos, 2);
  b.donate(st, after);
  b.output("out", b.reduce_sum(after, {2}));
  const ir::Graph g = testing::must(b.finish());
  expect_same(g, {{ir::Slot::kPos, {5}}});
  // A write past the cache is refused, not clamped.
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = testing::must(exec::cpu::CpuExecutor::create(testing::must(plan::make_plan(g, plan::cpu_caps(1))), state, pool));
  Status s = ex->run({{ir::Slot::kPos, {8}}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kCapacity);
}

// An f16 cache: rows rounded into it by cast, written in place, moved by transpose and
// slice as 2-byte elements, widened back; bit for bit the oracle's rounding.
TEST_F(Primitives, HalfPrecisionCacheRowsAreRoundedAndMoved) {
  ir::Builder b("f16cache");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V st = b.state("cache", DType::kF16, {1, 2, 8, 4}, ir::StateRole::kKeyCache, 0);
  V upd = rand(b, "u", {1, 2, 3, 4}) * 1000.0;  // past f16's 11 bits of mantissa
  V after = b.dynamic_update_slice(st, b.cast(upd, DType::kF16), pos, 2);
  b.donate(st, after);
  V moved = b.slice(b.transpose(after, {0, 2, 1, 3}), {0, 1, 0, 0}, {1, 7, 2, 4}, {1, 2, 1, 1});  // [1, 3, 2, 4]
  b.output("cache", b.cast(after, DType::kF32));
  b.output("moved", b.cast(moved, DType::kF32));
  expect_same(testing::must(b.finish()), {{ir::Slot::kPos, {2}}}, 0);
}

TEST(Executor, FailedValidationPublishesNothing) {
  ir::Builder b("guard");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V st = b.state("cache", DType::kF32, {1, 1, 4, 2}, ir::StateRole::kKeyCache, 0);
  V n = ir::ops::index_guard(pos, 0, 3, "0 <= pos <= 3");
  V upd = b.broadcast(b.reshape(b.cast(pos, DType::kF32), {1, 1, 1, 1}) + 1.0, {1, 1, 1, 2});
  V after = b.dynamic_update_slice(st, upd, n, 2);
  b.donate(st, after);
  b.output("out", b.reduce_sum(after, {2, 3}));
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = testing::must(exec::cpu::CpuExecutor::create(
      testing::must(plan::make_plan(testing::must(b.finish()), plan::cpu_caps(1))), state, pool));
  ASSERT_TRUE(ex->run({{ir::Slot::kPos, {1}}}).ok());
  EXPECT_FLOAT_EQ(ex->output("out")[0], 4.0f);  // (1 + 1) * 2
  Status s = ex->run({{ir::Slot::kPos, {9}}});   // clamped to 3 by the guard, but refused first
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("0 <= pos <= 3"), std::string::npos);
  const float* cache = static_cast<const float*>(state.find("cache")->buf.data());
  for (int i = 6; i < 8; ++i) EXPECT_EQ(cache[i], 0.0f) << "slot 3 was written by a refused step";
}

// run_argmax: each row's greedy token of an output, as exec::row_argmax finds it in the rows
// run() publishes; rows of a width that does not divide the output are refused.
TEST(Executor, RunArgmaxGivesEachRowsGreedyToken) {
  ir::Builder b("rows");
  V tok = b.slot(ir::Slot::kToken, DType::kI32, {6});
  b.output("logits", b.reshape(b.cast(tok, DType::kF32) * -1.0, {2, 3}));  // rows {-t0, -t1, -t2}, {...}
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = testing::must(exec::cpu::CpuExecutor::create(
      testing::must(plan::make_plan(testing::must(b.finish()), plan::cpu_caps(1))), state, pool));
  const exec::SlotValues slots{{ir::Slot::kToken, {4, 2, 2, 7, 9, 1}}};
  const std::span<const int32_t> ids = testing::must(ex->run_argmax(slots, "logits", 3));
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), (std::vector<int32_t>{1, 2}));  // ties to the first
  EXPECT_FALSE(ex->run_argmax(slots, "logits", 4).ok());
  EXPECT_FALSE(ex->run_argmax(slots, "nothing", 3).ok());
}

// run_sample on a host backend: draw_row on the rows run() publishes (here greedy with a bias
// that moves a row's token, and a sampled row whose top_k of 1 leaves one token); draws with
// edits outside their list are refused before the step runs.
TEST(Executor, RunSampleDrawsEachRowAsDrawRow) {
  ir::Builder b("rows");
  V tok = b.slot(ir::Slot::kToken, DType::kI32, {6});
  b.output("logits", b.reshape(b.cast(tok, DType::kF32) * -1.0, {2, 3}));
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = testing::must(exec::cpu::CpuExecutor::create(
      testing::must(plan::make_plan(testing::must(b.finish()), plan::cpu_caps(1))), state, pool));
  EXPECT_FALSE(ex->samples_on_device());
  const exec::SlotValues slots{{ir::Slot::kToken, {4, 2, 2, 7, 9, 1}}};
  exec::StepDraws draws;
  draws.edits = {{.token = 0, .ops = exec::LogitEdit::kAddBias, .bias = 5.0f}};
  draws.rows = {{.edits = 1}, {.temperature = 2.0f, .top_k = 1, .uniform = 0.9f}};
  const std::span<const int32_t> ids = testing::must(ex->run_sample(slots, "logits", 3, draws));
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), (std::vector<int32_t>{0, 2}));
  draws.rows[1].edits = 1;  // edits [0, 1) for row 0, [0, 1) for row 1: fine; [1, 2): not
  draws.rows[1].first_edit = 1;
  EXPECT_FALSE(ex->run_sample(slots, "logits", 3, draws).ok());
  EXPECT_FALSE(ex->run_sample(slots, "logits", 4, {}).ok());
}

TEST(Executor, UnboundOrMisshapedSlotsAreRefused) {
  ir::Builder b("slots");
  V tok = b.slot(ir::Slot::kToken, DType::kI32, {2});
  b.output("out", b.cast(tok, DType::kF32));
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = testing::must(exec::cpu::CpuExecutor::create(
      testing::must(plan::make_plan(testing::must(b.finish()), plan::cpu_caps(1))), state, pool));
  Status unbound = ex->run({});
  ASSERT_FALSE(unbound.ok());
  EXPECT_EQ(unbound.error().code(), ErrorCode::kInvalidInput);
  Status misshaped = ex->run({{ir::Slot::kToken, {1, 2, 3}}});
  ASSERT_FALSE(misshaped.ok());
  EXPECT_EQ(misshaped.error().code(), ErrorCode::kInvalidInput);
  ASSERT_TRUE(ex->run({{ir::Slot::kToken, {4, 5}}}).ok());
  EXPECT_EQ(ex->output("out")[1], 5.0f);
  EXPECT_TRUE(ex->output("nope").empty());
}

// Compiled attention stacks (fused Attention + Linear + RmsNorm...) equal the oracle on the
// traced graph, in every form the rewrite produces.
TEST(Executor, CompiledAttentionFormsMatchTheOracle) {
  std::mt19937_64 rng(testing::test_seed());
  for (int64_t n_rep : {1, 4}) {
    for (bool cached : {false, true}) {
      ir::Builder b("attn");
      const int64_t hkv = 2, hq = hkv * n_rep, t = cached ? 1 : 5, d = 32, cap = 300;
      V q = testing::input(b, "q", testing::random_buffer(rng, {1, hq, t, d}));
      V k = testing::input(b, "k", testing::random_buffer(rng, {1, hkv, t, d}));
      V v = testing::input(b, "v", testing::random_buffer(rng, {1, hkv, t, d}));
      V pos = b.slot(ir::Slot::kPos, DType::kI32, {t});
      const ir::ops::AttnOpts opts{.scale = 0.17, .softcap = cached ? 0.0 : 20.0};
      V out;
      if (cached) {
        V kc = b.state("k_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kKeyCache, 0);
        V vc = b.state("v_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kValueCache, 0);
        out = ir::ops::attention_cached(q, k, v, kc, vc, pos, ir::ops::causal_mask(pos, cap), opts).out;
      } else {
        out = ir::ops::attention_prefill(q, k, v, ir::ops::causal_mask(pos, t), opts);
      }
      b.output("out", out);
      const ir::Graph g = testing::must(b.finish());
      const ir::Graph c = testing::must(compile::run_passes(g, compile::default_passes())).graph;
      int fused = 0;
      for (const ir::Eqn& e : c.eqns) fused += e.op == ir::OpKind::kAttention;
      EXPECT_EQ(fused, 1) << "n_rep " << n_rep << " cached " << cached;
      std::vector<int32_t> p(static_cast<size_t>(t));
      for (int64_t i = 0; i < t; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(cached ? 123 : i);
      const eval::Outputs ref = testing::must(testing::run_graph(
          g, {{ir::Slot::kPos, testing::must(eval::Buffer::i32({t}, p))}}, eval::Precision::kNative));
      ThreadPool pool(2);
      exec::StateStore state;
      auto ex = testing::must(exec::cpu::CpuExecutor::create(testing::must(plan::make_plan(c, plan::cpu_caps(2))), state, pool));
      ASSERT_TRUE(ex->run({{ir::Slot::kPos, p}}).ok());
      std::span<const float> got = ex->output("out");
      EXPECT_LE(testing::rel_error(std::vector<double>(got.begin(), got.end()), ref.at("out").data), 1e-5)
          << "n_rep " << n_rep << " cached " << cached;
    }
  }
}

// ---- paged keys: the fused op reads the pools in place through the read map

struct PagedStep {
  int64_t rows, hq, hkv, tokens, cap, pool, d;
  DType kv;
};

// One ops::attention_paged step over pools of `pool` rows, causal within each row.
ir::Graph paged_graph(const PagedStep& s, std::mt19937_64& rng) {
  ir::Builder b(str_cat("paged", s.tokens));
  const int64_t n = s.rows * s.tokens;
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  V read = b.map_slot(ir::Slot::kSlotMap, {s.rows, s.cap}, s.pool);
  V write = b.map_slot(ir::Slot::kWriteMap, {n}, s.pool);
  V q = testing::input(b, "q", testing::random_buffer(rng, {s.rows, s.hq, s.tokens, s.d}));
  V k = testing::input(b, "k", testing::random_buffer(rng, {s.rows, s.hkv, s.tokens, s.d}));
  V v = testing::input(b, "v", testing::random_buffer(rng, {s.rows, s.hkv, s.tokens, s.d}));
  V kp = b.state("k_pool", s.kv, {s.pool, s.hkv, s.d}, ir::StateRole::kKeyCache, 0);
  V vp = b.state("v_pool", s.kv, {s.pool, s.hkv, s.d}, ir::StateRole::kValueCache, 0);
  V mask = b.reshape(ir::ops::causal_mask(pos, s.cap), {s.rows, 1, s.tokens, s.cap});
  b.output("out", ir::ops::attention_paged(q, k, v, kp, vp, write, read, b.reshape(pos, {s.rows, s.tokens}), mask,
                                           {.scale = 0.2, .softcap = 0})
                      .out);
  return testing::must(b.finish());
}

// A prefill of `first` tokens per row and then the step: the CPU executor runs the compiled
// graphs (the paged-key form) against the oracle on the traced ones, sharing the pools
// across the two steps, rows in shuffled 16-token blocks of a pool with spare blocks.
TEST(Executor, PagedAttentionMatchesTheOracle) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const PagedStep steps[] = {
      {3, 8, 2, 1, 64, 256, 32, DType::kF32},   // decode, streaming
      {3, 8, 2, 3, 64, 256, 32, DType::kF16},   // a chunk of 3 tokens, f16 pools
      {1, 8, 2, 1, 560, 592, 32, DType::kF32},  // decode whose rows leave cores idle: split-KV over two pieces
      {1, 4, 1, 1, 560, 592, 64, DType::kF16},
      {1, 4, 1, 1, 512, 544, 64, DType::kF32},  // the same over one key piece: streaming
  };
  for (const PagedStep& s : steps) {
    const std::string what = str_cat(s.rows, " rows x ", s.tokens, ", cap ", s.cap, " ", dtype_name(s.kv));
    const int64_t first = s.cap - 2 * s.tokens - 7;  // positions the prefill fills
    std::vector<int32_t> blocks(static_cast<size_t>(s.pool / 16));
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    auto slot = [&](int64_t r, int64_t p) {
      return static_cast<int32_t>(blocks[static_cast<size_t>(r * (s.cap / 16) + p / 16)] * 16 + p % 16);
    };
    std::vector<int32_t> read;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t p = 0; p < s.cap; ++p) read.push_back(slot(r, p));
    auto slots_for = [&](int64_t start, int64_t tokens) {
      std::vector<int32_t> pos, write;
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t j = 0; j < tokens; ++j) {
          pos.push_back(static_cast<int32_t>(start + j));
          write.push_back(slot(r, start + j));
        }
      return exec::SlotValues{{ir::Slot::kPos, pos}, {ir::Slot::kWriteMap, write}, {ir::Slot::kSlotMap, read}};
    };
    PagedStep pre = s;
    pre.tokens = first;
    const ir::Graph graphs[] = {paged_graph(pre, rng), paged_graph(s, rng)};
    const exec::SlotValues slots[] = {slots_for(0, first), slots_for(first, s.tokens)};
    eval::StateStore oracle_state;
    exec::StateStore state;
    ThreadPool pool(2);
    for (int step = 0; step < 2; ++step) {
      const ir::Graph& g = graphs[step];
      eval::SlotBindings bind;
      for (const auto& [sl, vals] : slots[step]) {
        const Shape shape = sl == ir::Slot::kSlotMap ? Shape{s.rows, s.cap} : Shape{static_cast<int64_t>(vals.size())};
        bind.emplace(sl, testing::must(eval::Buffer::i32(shape, vals)));
      }
      ASSERT_TRUE(eval::allocate_state(g, oracle_state).ok());
      eval::Oracle oracle({.precision = eval::Precision::kNative, .threads = 1});
      const eval::Outputs ref = testing::must(oracle.run(g, bind, oracle_state));

      const ir::Graph c = testing::must(compile::run_passes(g, compile::default_passes())).graph;
      int paged = 0, gathers = 0;
      for (const ir::Eqn& e : c.eqns) {
        paged += e.op == ir::OpKind::kAttention && e.params.attn.has_read;
        gathers += e.op == ir::OpKind::kGather;
      }
      EXPECT_EQ(paged, 1) << what;
      EXPECT_EQ(gathers, 0) << what;
      plan::Plan p = testing::must(plan::make_plan(c, plan::cpu_caps(2)));
      if (step == 1) {
        const bool split = s.rows * s.hkv < 4 && s.tokens == 1 && s.cap > plan::kCpuAttentionPiece;
        bool saw = false;
        for (const plan::KernelRequest& r : p.requests) {
          if (r.op != ir::OpKind::kAttention) continue;
          saw = true;
          EXPECT_EQ(r.kernel, split ? "attention.split_kv" : "attention.streaming") << what;
          EXPECT_EQ(r.attention.pool_rows, s.pool);
          EXPECT_EQ(r.attention.lk, s.cap);
        }
        EXPECT_TRUE(saw);
      }
      auto ex = testing::must(exec::cpu::CpuExecutor::create(std::move(p), state, pool));
      Status st = ex->run(slots[step]);
      ASSERT_TRUE(st.ok()) << what << ": " << st.error().to_string();
      std::span<const float> got = ex->output("out");
      ASSERT_EQ(static_cast<int64_t>(got.size()), ref.at("out").numel());
      const double tol = s.kv == DType::kF16 ? 1e-3 : 1e-5;
      EXPECT_LE(testing::rel_error(std::vector<double>(got.begin(), got.end()), ref.at("out").data), tol)
          << what << " step " << step;
    }
  }
}

// The kernel reads the pools at the map's words unchecked, so the executor takes a paged eqn
// only over a read-map slot declared over the pool; a hand-built one over a constant map is
// refused when the plan is bound.
TEST(Executor, PagedAttentionNeedsADeclaredReadMap) {
  std::mt19937_64 rng(testing::test_seed());
  ir::Builder b("hand_paged");
  V q = testing::input(b, "q", testing::random_buffer(rng, {1, 2, 1, 8}));
  V k = testing::input(b, "k", testing::random_buffer(rng, {4, 2, 8}));
  V v = testing::input(b, "v", testing::random_buffer(rng, {4, 2, 8}));
  V read = testing::input(b, "read", testing::must(eval::Buffer::i32({1, 3}, {0, 3, 2})));
  ir::Params p;
  p.attn.n_rep = 1;
  p.attn.has_read = true;
  b.output("out", b.emit(ir::OpKind::kAttention, {q, k, v, read}, p));
  ThreadPool pool(1);
  exec::StateStore state;
  auto ex = exec::cpu::CpuExecutor::create(testing::must(plan::make_plan(testing::must(b.finish()), plan::cpu_caps(1))),
                                           state, pool);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(ex.error().message().find("not a read-map slot"), std::string::npos) << ex.error().to_string();
}

}  // namespace
}  // namespace kvf
