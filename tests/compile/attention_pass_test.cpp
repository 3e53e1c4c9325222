// The attention rewrite pass: every ops:: attention form of the shared case table
// (attention_cases.h) becomes exactly one Attention eqn with the right params and operands,
// and the oracle gives what the chain gave (native 1e-5, f64 1e-12) and what a plain-loop
// reference gives, zeros for a row that sees no key; every near-miss keeps its decomposition
// and its results bit for bit. Real model graphs get one Attention per layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compile/attention_match.h"
#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "attention_cases.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using eval::Precision;
using ir::Builder;
using ir::OpKind;
using ir::V;
namespace ops = ir::ops;
using namespace testing::attention_cases;

// ---- graph helpers

std::vector<OpKind> op_sequence(const ir::Graph& g) {
  std::vector<OpKind> ops;
  for (const ir::Eqn& e : g.eqns) ops.push_back(e.op);
  return ops;
}

ir::Graph attention_only(const ir::Graph& g) {
  Result<ir::Graph> out = compile::attention_pass().run(g);
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  if (!out.ok()) return g;
  Status ok = ir::verify(*out);
  EXPECT_TRUE(ok.ok()) << ok.error().to_string();
  return std::move(*out);
}

ir::Graph all_passes(const ir::Graph& g) {
  Result<compile::Compiled> c = compile::run_passes(g, compile::default_passes());
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return c.ok() ? std::move(c->graph) : g;
}

// ---- running before and after

struct RunResult {
  eval::Outputs outputs;
  eval::StateStore state;  // after publication
};

RunResult run(const ir::Graph& g, const eval::SlotBindings& slots, eval::StateStore state, Precision precision) {
  EXPECT_TRUE(eval::allocate_state(g, state).ok());
  eval::Oracle oracle({.precision = precision, .threads = 1});
  Result<eval::Outputs> out = oracle.run(g, slots, state);
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  return {out.ok() ? std::move(*out) : eval::Outputs{}, std::move(state)};
}

// Every element written: the shape's element count and no NaN.
void expect_written(const Buffer& b, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : b.shape) n *= d;
  EXPECT_EQ(b.numel(), n) << what;
  for (double x : b.data) {
    if (std::isnan(x)) {
      ADD_FAILURE() << what << " has a NaN (an element not written, or a poisoned row read)";
      return;
    }
  }
}

double tolerance(Precision p) { return p == Precision::kF64 ? 1e-12 : 1e-5; }

// The two graphs agree on every output and every published state, in both precisions.
// Outputs start poisoned (absent) and must come back whole. Returns the f64 outputs of `after`.
eval::Outputs expect_same_results(const ir::Graph& before, const ir::Graph& after, const eval::SlotBindings& slots,
                                  const eval::StateStore& state = {}) {
  eval::Outputs f64;
  for (Precision p : {Precision::kNative, Precision::kF64}) {
    SCOPED_TRACE(p == Precision::kF64 ? "f64" : "native");
    const RunResult a = run(before, slots, state, p), b = run(after, slots, state, p);
    EXPECT_EQ(a.outputs.size(), before.outputs.size());
    for (const auto& [name, want] : a.outputs) {
      EXPECT_TRUE(b.outputs.count(name)) << name;
      if (!b.outputs.count(name)) continue;
      expect_written(b.outputs.at(name), name);
      EXPECT_LE(testing::rel_error(b.outputs.at(name).data, want.data), tolerance(p)) << name;
    }
    for (const auto& [name, want] : a.state) {
      EXPECT_TRUE(b.state.count(name)) << name;
      if (!b.state.count(name)) continue;
      EXPECT_TRUE(testing::same_values(b.state.at(name).data, want.data)) << "state " << name;
    }
    if (p == Precision::kF64) f64 = b.outputs;
  }
  return f64;
}

// Near-misses: the same eqns, and the same bits out.
void expect_unchanged(const ir::Graph& before, const ir::Graph& after, const eval::SlotBindings& slots) {
  EXPECT_EQ(testing::count_op(after, OpKind::kAttention), 0);
  EXPECT_EQ(op_sequence(after), op_sequence(before));
  for (Precision p : {Precision::kNative, Precision::kF64}) {
    const RunResult a = run(before, slots, {}, p), b = run(after, slots, {}, p);
    for (const auto& [name, want] : a.outputs) {
      ASSERT_TRUE(b.outputs.count(name)) << name;
      EXPECT_EQ(b.outputs.at(name).data, want.data) << name;
    }
  }
}

class AttentionForms : public CaseTest {};

void expect_operands(const Case& c, const ir::Graph& g, const ir::Eqn& e) {
  const ir::AttnParams& p = e.params.attn;
  EXPECT_EQ(p.n_rep, c.hq / c.hkv);
  EXPECT_DOUBLE_EQ(p.scale, 1.0 / std::sqrt(static_cast<double>(c.dk)));
  EXPECT_EQ(p.softcap, c.softcap);
  EXPECT_EQ(p.has_shared, c.shared > 0);
  EXPECT_EQ(p.has_mask, c.mask != MaskKind::kNone);
  EXPECT_EQ(p.has_len, c.form == Form::kLive || c.form == Form::kCached);
  ASSERT_EQ(e.in.size(), 3u + p.has_shared + p.has_mask + p.has_len);
  EXPECT_EQ(testing::operand_origin(g, e.in[0]), "q");
  const bool in_cache = c.form == Form::kMasked || c.form == Form::kCached;
  EXPECT_EQ(testing::operand_origin(g, e.in[1]), in_cache ? "dynamic_update_slice" : c.shared ? "k_part" : "k");
  EXPECT_EQ(testing::operand_origin(g, e.in[2]), in_cache ? "dynamic_update_slice" : "v");
  size_t next = 3;
  if (p.has_shared) {
    EXPECT_EQ(testing::operand_origin(g, e.in[next++]), "k_src");
  }
  if (p.has_mask) {
    const Shape& m = g.type(e.in[next++]).shape;
    const int64_t heads = c.mask == MaskKind::kAlibi ? c.hq : 1, rows = per_row_mask(c.mask) ? c.batch : 1;
    EXPECT_EQ(m, (Shape{rows, heads, c.lq, c.lk}));
  }
  if (p.has_len) {
    EXPECT_EQ(testing::operand_origin(g, e.in[next++]), "max");  // the index guard's clamp
  }
}

TEST_P(AttentionForms, OneAttentionEqnWithTheChainsResults) {
  const Case& c = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  Built built = FormBuilder(c, rng).build();
  const ir::Graph fused = attention_only(built.graph);
  const std::vector<const ir::Eqn*> att = testing::find_eqns(fused, OpKind::kAttention);
  ASSERT_EQ(att.size(), 1u) << ir::print(fused);
  expect_operands(c, fused, *att[0]);
  // The chain is gone, the broadcast key of a split key included.
  for (OpKind op : {OpKind::kExp, OpKind::kReduceMax, OpKind::kReduceSum, OpKind::kBroadcast, OpKind::kConcat}) {
    EXPECT_EQ(testing::count_op(fused, op), 0) << ir::op_name(op);
  }
  EXPECT_EQ(testing::count_op(fused, OpKind::kMatMul), 0);
  expect_same_results(built.graph, fused, built.slots, built.state);
  // f64 keeps an f16 cache's new rows unrounded; the native run rounds them as the cache does,
  // as the reference does, and otherwise stays within f32 rounding of it.
  const bool f32 = c.kv == DType::kF32;
  const Precision p = f32 ? Precision::kF64 : Precision::kNative;
  const double tol = f32 ? 1e-12 : 1e-6;
  const RunResult after = run(fused, built.slots, built.state, p), before = run(built.graph, built.slots, built.state, p);
  EXPECT_LE(testing::rel_error(after.outputs.at("out").data, reference_attention(built.ref)), tol);
  EXPECT_LE(testing::rel_error(before.outputs.at("out").data, reference_attention(built.ref)), tol);
  expect_zero_rows(after.outputs.at("out").data, built.ref, "the fused op");
  expect_zero_rows(before.outputs.at("out").data, built.ref, "the chain");
}

TEST_P(AttentionForms, SameAfterEveryDefaultPass) {
  const Case& c = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  Built built = FormBuilder(c, rng).build();
  const ir::Graph compiled = all_passes(built.graph);
  ASSERT_EQ(testing::count_op(compiled, OpKind::kAttention), 1) << ir::print(compiled);
  expect_same_results(built.graph, compiled, built.slots, built.state);
  // A second run finds nothing left to fuse.
  EXPECT_EQ(op_sequence(attention_only(compiled)), op_sequence(compiled));
}

INSTANTIATE_TEST_SUITE_P(Forms, AttentionForms, ::testing::ValuesIn(kCases), case_name);

TEST(AttentionPass, DeclaresItselfReassociating) {
  const compile::Pass p = compile::attention_pass();
  EXPECT_EQ(p.name, "attention");
  EXPECT_EQ(p.exactness, compile::Exactness::kReassociating);
}

TEST(AttentionPass, TwoLayersSharingAMaskGiveTwoEqns) {
  std::mt19937_64 rng(testing::test_seed());
  Builder b("two_layers");
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {4});
  const V mask = ops::causal_mask(pos, 4);
  V x = testing::input(b, "x", testing::random_buffer(rng, {1, 2, 4, 8}));
  for (int l = 0; l < 2; ++l) {
    const V k = testing::input(b, str_cat("k", l), testing::random_buffer(rng, {1, 1, 4, 8}));
    const V v = testing::input(b, str_cat("v", l), testing::random_buffer(rng, {1, 1, 4, 8}));
    x = ops::attention_prefill(x, k, v, mask, {.scale = 0.3});  // layer 1's q is layer 0's output
  }
  b.output("out", x);
  const ir::Graph g = testing::must(b.finish());
  const ir::Graph fused = attention_only(g);
  ASSERT_EQ(testing::count_op(fused, OpKind::kAttention), 2);
  expect_same_results(g, fused, {{ir::Slot::kPos, testing::must(Buffer::i32({4}, {0, 1, 2, 3}))}});
}

// What canonicalize leaves: no mul for a scale of 1, and repeat_kv's first reshape reading
// the value before an earlier reshape (the fused op then reads k through a fresh reshape).
TEST(AttentionPass, FusesWhatCanonicalizeLeaves) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  Builder b("canonical");
  const V q = testing::input(b, "q", testing::random_buffer(rng, {2, 4, 3, 8}));
  const V k_flat = testing::input(b, "k_flat", testing::random_buffer(rng, {2, 2, 5 * 8}));
  const V v = testing::input(b, "v", testing::random_buffer(rng, {2, 2, 5, 8}));
  b.output("out", ops::attention_prefill(q, b.reshape(k_flat, {2, 2, 5, 8}), v, V{}, {.scale = 1.0}));
  const ir::Graph g = testing::must(b.finish());
  const ir::Graph compiled = all_passes(g);
  const std::vector<const ir::Eqn*> att = testing::find_eqns(compiled, OpKind::kAttention);
  ASSERT_EQ(att.size(), 1u) << ir::print(compiled);
  EXPECT_EQ(att[0]->params.attn.scale, 1.0);
  EXPECT_EQ(att[0]->params.attn.n_rep, 2);
  EXPECT_EQ(compiled.type(att[0]->in[1]), (ir::TensorType{DType::kF32, {2, 2, 5, 8}}));
  expect_same_results(g, compiled, {});
}

// ---- near-misses: a hand-written chain with one thing changed at a time

constexpr int64_t kB = 2, kHq = 4, kHkv = 2, kLq = 3, kLk = 5, kD = 8;

struct Knobs {
  int64_t max_axis = 3, sum_axis = 3;
  bool subtract_max = true;
  bool guard = true;             // ops::masked_softmax's guard; false: a plain softmax
  bool guard_of_other = false;   // the divisor's select on another compare than the shift's
  bool max_of_other = false;     // the max of another tensor than the scores
  bool sum_of_other = false;     // divide by the sum of another exp
  bool scale_tensor = false;     // scale by a constant f32[1] instead of a literal
  bool scale_left = false;       // mul(scale, scores): still fused
  bool mask_left = false;        // add(mask, scores): still fused
  Shape mask_shape{};            // empty: no mask
  int64_t k_heads = kHkv;        // 1 with repeat = false: a key head the matmul broadcasts
  bool repeat = true;
  bool v_unrepeated = false;     // v already has Hq heads while k is repeated
  bool scores_exported = false;  // the scores are also a graph output
  double cap_in = 0, cap_out = 0;  // softcap: tanh(s / cap_in) * cap_out
  bool f16 = false;
};

ir::Graph hand_chain(const Knobs& kn, std::mt19937_64& rng) {
  Builder b("near_miss");
  auto in = [&](const std::string& name, Shape s) { return testing::input(b, name, testing::random_buffer(rng, std::move(s))); };
  V q = in("q", {kB, kHq, kLq, kD});
  V k = in("k", {kB, kn.k_heads, kLk, kD});
  V v = in("v", {kB, kn.v_unrepeated ? kHq : kn.k_heads, kLk, kD});
  if (kn.f16) {
    q = b.cast(q, DType::kF16), k = b.cast(k, DType::kF16), v = b.cast(v, DType::kF16);
  }
  const int64_t n_rep = kHq / kn.k_heads;
  const V k_exp = kn.repeat ? ops::repeat_kv(k, n_rep) : k;
  const V v_exp = kn.repeat && !kn.v_unrepeated ? ops::repeat_kv(v, n_rep) : v;
  V s = b.matmul(q, b.transpose(k_exp, {0, 1, 3, 2}));
  if (kn.scale_tensor) s = s * in("scale", {1});
  else s = kn.scale_left ? b.like(s, 0.35) * s : s * 0.35;
  if (kn.cap_in > 0) s = b.unary(OpKind::kTanh, s / kn.cap_in) * kn.cap_out;
  if (!kn.mask_shape.empty()) {
    const V mask = in("mask", kn.mask_shape);
    s = kn.mask_left ? mask + s : s + mask;
  }
  if (kn.scores_exported) b.output("scores", s);
  const V other = in("other", {kB, kHq, kLq, kLk});
  const V m = b.reduce_max(kn.max_of_other ? other : s, {kn.max_axis}, true);
  const V none = b.compare(m, b.like(m, -kInf), ir::CmpDir::kEq);
  const V shift = kn.guard ? b.select(none, b.like(m, 0.0), m) : m;
  const V ex = b.unary(OpKind::kExp, kn.subtract_max ? s - shift : s);
  const V ex2 = b.unary(OpKind::kExp, other);
  const V sum = b.reduce_sum(kn.sum_of_other ? ex2 : ex, {kn.sum_axis}, true);
  const V guard = kn.guard_of_other ? b.compare(m, b.like(m, 0.0), ir::CmpDir::kLt) : none;
  const V divisor = kn.guard ? b.select(guard, b.like(sum, 1.0), sum) : sum;
  b.output("out", b.matmul(ex / divisor, v_exp));
  return testing::must(b.finish());
}

// Why the matcher declines at the graph's last matmul.
std::string why_not(const ir::Graph& g) {
  const compile::Uses uses(g);
  size_t root = 0;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op == OpKind::kMatMul) root = i;
  }
  const compile::attention::MatchResult r = compile::attention::match_attention(g, uses, root);
  return r.match ? "" : r.why_not;
}

class NearMiss : public ::testing::Test {
 protected:
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};

  // Declined for the stated reason, and nothing changes.
  void expect_kept(const Knobs& kn, const std::string& reason) {
    SCOPED_TRACE(str_cat("seed ", seed, ", expecting: ", reason));
    const ir::Graph g = hand_chain(kn, rng);
    EXPECT_NE(why_not(g).find(reason), std::string::npos) << "declined for: " << why_not(g);
    expect_unchanged(g, attention_only(g), {});
    EXPECT_EQ(testing::count_op(all_passes(g), OpKind::kAttention), 0);
  }
  void expect_fused(const Knobs& kn) {
    SCOPED_TRACE(str_cat("seed ", seed));
    const ir::Graph g = hand_chain(kn, rng);
    const ir::Graph fused = attention_only(g);
    ASSERT_EQ(testing::count_op(fused, OpKind::kAttention), 1) << why_not(g);
    expect_same_results(g, fused, {});
  }
};

TEST_F(NearMiss, TheHandChainItselfIsFused) {
  expect_fused({});
  expect_fused({.mask_shape = {kB, kHq, kLq, kLk}});
  expect_fused({.mask_shape = {1, 1, kLq, kLk}, .cap_in = 2.5, .cap_out = 2.5});
  expect_fused({.scale_left = true, .mask_left = true, .mask_shape = {1, kHq, kLq, kLk}});
}

TEST_F(NearMiss, ReduceOverTheWrongAxis) {
  expect_kept({.max_axis = 2}, "the max is not over the last axis");
  expect_kept({.sum_axis = 2}, "the sum is not over the last axis");
}

TEST_F(NearMiss, NoMaxSubtract) { expect_kept({.subtract_max = false}, "not of max-subtracted scores"); }

// A plain softmax gives 0/0 where the op gives zeros (a row that sees no key): not the op.
TEST_F(NearMiss, SoftmaxWithoutTheNoKeyGuard) {
  expect_kept({.guard = false}, "the divisor is not select(none, 1, sum)");
  expect_kept({.guard_of_other = true}, "the guard is not one compare(max, -inf, eq) for both selects");
}

TEST_F(NearMiss, MaxOrSumOfAnotherTensor) {
  expect_kept({.max_of_other = true}, "not the max of the same scores");
  expect_kept({.sum_of_other = true}, "not the sum of the same exp");
}

TEST_F(NearMiss, MaskOfAnotherShape) {
  expect_kept({.mask_shape = {1, 1, kLq, 1}}, "is not f32[1|B,1|Hq,Lq,Lk]");
  expect_kept({.mask_shape = {1, kLq, kLk}}, "is not f32[1|B,1|Hq,Lq,Lk]");
}

TEST_F(NearMiss, SingleKeyHeadOnlyBroadcastByTheMatmul) {
  expect_kept({.k_heads = 1, .repeat = false}, "a key head the matmul broadcasts");
}

TEST_F(NearMiss, ScaleIsATensor) { expect_kept({.scale_tensor = true}, "not a scalar literal"); }

TEST_F(NearMiss, KeyAndValueRepeatedDifferently) { expect_kept({.v_unrepeated = true}, "k is repeated 2x but v 1x"); }

TEST_F(NearMiss, IntermediateWithAnotherUser) {
  expect_kept({.scores_exported = true}, "is also an output");
}

TEST_F(NearMiss, SoftcapWithTwoDifferentCaps) {
  expect_kept({.cap_in = 2.0, .cap_out = 3.0}, "are not matmul(q, kᵀ)");
}

TEST_F(NearMiss, HalfPrecisionChain) { expect_kept({.f16 = true}, "not f32"); }

// attention_live's chain, with its validations dropped: the clamp alone does not prove the
// length, so the decomposition stays (and gives the same answer).
TEST_F(NearMiss, LiveLengthWithoutDeclaredWitness) {
  SCOPED_TRACE(str_cat("seed ", seed));
  Builder b("live_unwitnessed");
  const V q = testing::input(b, "q", testing::random_buffer(rng, {kB, kHq, 1, kD}));
  const V k = testing::input(b, "k", testing::random_buffer(rng, {kB, kHkv, kLk, kD}));
  const V v = testing::input(b, "v", testing::random_buffer(rng, {kB, kHkv, kLk, kD}));
  const V len = b.slot(ir::Slot::kSeqLen, DType::kI32, {kB});
  b.output("out", ops::attention_live(q, k, v, len, V{}, {.scale = 0.3}));
  ir::Graph g = testing::must(b.finish());
  const eval::SlotBindings slots{{ir::Slot::kSeqLen, testing::must(Buffer::i32({kB}, {2, 5}))}};
  ASSERT_EQ(testing::count_op(attention_only(g), OpKind::kAttention), 1);  // witnessed: fused
  g.validations.clear();
  ASSERT_TRUE(ir::verify(g).ok());
  EXPECT_NE(why_not(g).find("no declared validation witness"), std::string::npos) << why_not(g);
  expect_unchanged(g, attention_only(g), slots);
}

// A guard whose bounds do not lie within 1..Lk proves nothing about the keys visited.
TEST_F(NearMiss, LiveGuardBoundsOutsideTheKeys) {
  SCOPED_TRACE(str_cat("seed ", seed));
  Builder b("live_wide_guard");
  const V q = testing::input(b, "q", testing::random_buffer(rng, {kB, kHq, 1, kD}));
  const V k = testing::input(b, "k", testing::random_buffer(rng, {kB, kHq, kLk, kD}));
  const V v = testing::input(b, "v", testing::random_buffer(rng, {kB, kHq, kLk, kD}));
  const V len = b.slot(ir::Slot::kSeqLen, DType::kI32, {kB});
  const V n = ops::index_guard(len, 0, kLk, "0 <= len <= Lk");  // 0 would leave a row no key
  const V active = b.compare(b.iota({1, kLk}, 1), b.reshape(n, {kB, 1}), ir::CmpDir::kLt);
  const V rows = b.reshape(active, {kB, 1, kLk, 1});
  const V k0 = b.select(rows, k, b.like(k, 0.0)), v0 = b.select(rows, v, b.like(v, 0.0));
  V s = b.matmul(q, b.transpose(k0, {0, 1, 3, 2})) * 0.3;
  s = b.select(b.reshape(active, {kB, 1, 1, kLk}), s, b.like(s, -kInf));
  b.output("out", b.matmul(ops::masked_softmax(s), v0));
  const ir::Graph g = testing::must(b.finish());
  EXPECT_NE(why_not(g).find("are not within 1.."), std::string::npos) << why_not(g);
  expect_unchanged(g, attention_only(g), {{ir::Slot::kSeqLen, testing::must(Buffer::i32({kB}, {1, 4}))}});
}

// ---- a decode step's causal mask, implied by its live length

// One query at position pos over Lk keys: the mask k <= mask_pos, the live length len_pos + 1.
ir::Graph decode_step(std::mt19937_64& rng, bool mask_from_len_pos) {
  Builder b("decode_mask");
  const V q = testing::input(b, "q", testing::random_buffer(rng, {1, kHq, 1, kD}));
  const V k = testing::input(b, "k", testing::random_buffer(rng, {1, kHkv, kLk, kD}));
  const V v = testing::input(b, "v", testing::random_buffer(rng, {1, kHkv, kLk, kD}));
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  const V other = b.slot(ir::Slot::kSeqLen, DType::kI32, {1});
  const V mask = ops::causal_mask(mask_from_len_pos ? pos : other, kLk);
  b.output("out", ops::attention_live(q, k, v, pos + 1.0, mask, {.scale = 0.3}));
  return testing::must(b.finish());
}

eval::SlotBindings decode_slots(int32_t pos, int32_t other) {
  return {{ir::Slot::kPos, testing::must(Buffer::i32({1}, {pos}))},
          {ir::Slot::kSeqLen, testing::must(Buffer::i32({1}, {other}))}};
}

// The decode step's graph before and after the attention pass, and its one fused eqn.
class ImpliedMask : public testing::SeededTest {
 protected:
  // The fused eqn, or null when the pass did not make exactly one.
  const ir::Eqn* fuse(bool mask_from_len_pos) {
    g_ = decode_step(rng_, mask_from_len_pos);
    fused_ = attention_only(g_);
    const std::vector<const ir::Eqn*> att = testing::find_eqns(fused_, OpKind::kAttention);
    return att.size() == 1 ? att[0] : nullptr;
  }
  ir::Graph g_, fused_;
};

TEST_F(ImpliedMask, ACausalMaskOverTheLivePositionIsDropped) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const ir::Eqn* att = fuse(true);
  ASSERT_NE(att, nullptr) << ir::print(fused_);
  EXPECT_FALSE(att->params.attn.has_mask);
  EXPECT_TRUE(att->params.attn.has_len);
  EXPECT_EQ(att->in.size(), 4u);  // q, k, v, len
  for (int32_t pos = 0; pos < kLk; ++pos) expect_same_results(g_, fused_, decode_slots(pos, 0));
  EXPECT_EQ(testing::count_op(all_passes(g_), OpKind::kSelect), 0);  // the mask's select went with its last reader
}

// A mask over another position than the live length's says something the length does not.
TEST_F(ImpliedMask, AMaskOverAnotherPositionIsKept) {
  SCOPED_TRACE(str_cat("seed ", seed_));
  const ir::Eqn* att = fuse(false);
  ASSERT_NE(att, nullptr) << ir::print(fused_);
  EXPECT_TRUE(att->params.attn.has_mask);
  expect_same_results(g_, fused_, decode_slots(4, 1));  // keys 0..1 of the 5 live ones
}

// ---- real model graphs: one Attention per layer, same logits and caches

struct Steps {
  ir::Graph full, prefill, decode;
};

Steps trace_steps(const models::Model& m, int64_t n_full, int64_t n_prompt, int64_t capacity) {
  return {testing::must(m.trace_step({.n_tokens = n_full, .capacity = 0, .cached = false})),
          testing::must(m.trace_step({.n_tokens = n_prompt, .capacity = capacity, .cached = true})),
          testing::must(m.trace_step({.n_tokens = 1, .capacity = capacity, .cached = true}))};
}

// What every layer's fused eqn of a family carries.
struct Expect {
  double softcap = 0;
  bool mla = false;  // MLA: the key is split in every step; cached steps attend one latent head (n_rep = H)
  bool head_mask = false;          // ALiBi: the mask has a head axis
};

void expect_layers(const models::Model& m, const ir::Graph& g, bool cached, bool canonical, const Expect& want) {
  SCOPED_TRACE(g.name);
  const std::vector<const ir::Eqn*> att = testing::find_eqns(g, OpKind::kAttention);
  ASSERT_EQ(static_cast<int64_t>(att.size()), m.config.n_layers);
  EXPECT_EQ(testing::count_op(g, OpKind::kReduceMax), 0);  // no softmax chain left: only softmax takes a max
  for (size_t layer = 0; layer < att.size(); ++layer) {
    SCOPED_TRACE(str_cat("layer ", layer));
    const ir::Eqn* e = att[layer];
    const ir::AttnParams& p = e->params.attn;
    EXPECT_EQ(p.n_rep, want.mla && cached ? m.config.n_heads : m.config.n_heads / m.config.n_kv_heads);
    EXPECT_EQ(p.softcap, want.softcap);
    EXPECT_EQ(p.has_len, cached);
    EXPECT_EQ(p.has_shared, want.mla);
    // A decode step's plain causal mask is implied by the live length and dropped; a window
    // or an ALiBi bias keeps it. The pass sees the length as pos + 1 once canonicalize has
    // folded the trace's one-element slice and broadcast 1.
    const bool decode = canonical && cached && g.type(e->out).shape[2] == 1;
    const bool plain_causal = !want.head_mask && !m.config.sliding(static_cast<int64_t>(layer));
    EXPECT_EQ(p.has_mask, !(decode && plain_causal));
    if (!p.has_mask) continue;
    const Shape& mask = g.type(e->in[3 + p.has_shared]).shape;
    EXPECT_EQ(mask[1], want.head_mask ? m.config.n_heads : 1);
  }
}

void expect_model_fused(const models::Model& m, const Expect& want, bool every_pass) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed, every_pass ? ", default passes" : ", attention pass only"));
  std::mt19937_64 rng(seed);
  const int64_t n_full = 7, n_prompt = 5, capacity = 12;
  const Steps before = trace_steps(m, n_full, n_prompt, capacity);
  auto fuse = [&](const ir::Graph& g) { return every_pass ? all_passes(g) : attention_only(g); };
  const Steps after{fuse(before.full), fuse(before.prefill), fuse(before.decode)};
  expect_layers(m, after.full, false, every_pass, want);
  expect_layers(m, after.prefill, true, every_pass, want);
  expect_layers(m, after.decode, true, every_pass, want);

  expect_same_results(before.full, after.full, testing::token_slots(testing::random_ids(rng, n_full, m.config.vocab), 0));
  const std::vector<int32_t> prompt = testing::random_ids(rng, n_prompt, m.config.vocab);
  const std::vector<int32_t> next = testing::random_ids(rng, 1, m.config.vocab);
  const eval::SlotBindings prefill_slots = testing::token_slots(prompt, 0);
  const eval::SlotBindings decode_slots = testing::token_slots(next, static_cast<int32_t>(n_prompt));
  for (Precision p : {Precision::kNative, Precision::kF64}) {
    SCOPED_TRACE(p == Precision::kF64 ? "f64" : "native");
    const RunResult a = run(before.prefill, prefill_slots, {}, p), b = run(after.prefill, prefill_slots, {}, p);
    const RunResult a2 = run(before.decode, decode_slots, a.state, p);
    const RunResult b2 = run(after.decode, decode_slots, b.state, p);
    for (const auto* pair : {&a, &a2}) {
      const RunResult& other = pair == &a ? b : b2;
      ASSERT_TRUE(other.outputs.count("logits") && pair->outputs.count("logits"));
      expect_written(other.outputs.at("logits"), "logits");
      EXPECT_LE(testing::rel_error(other.outputs.at("logits").data, pair->outputs.at("logits").data), tolerance(p));
    }
    ASSERT_EQ(b2.state.size(), a2.state.size());
    for (const auto& [name, cache] : a2.state) {
      EXPECT_LE(testing::rel_error(b2.state.at(name).data, cache.data), tolerance(p)) << name;
    }
  }
}

models::OpenOptions no_tokenizer() {
  models::OpenOptions opts;
  opts.with_tokenizer = false;
  return opts;
}

TEST(AttentionModels, SyntheticLlama260k) {
  const models::Model m = testing::must(models::open_model("synthetic:llama-260k", no_tokenizer()));
  expect_model_fused(m, {}, false);
  expect_model_fused(m, {}, true);
}

struct FixtureCase {
  const char* family;
  Expect want;
};

class AttentionFixtures : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(AttentionFixtures, OneAttentionPerLayer) {
  const FixtureCase& c = GetParam();
  const models::Model m = testing::must(models::open_model(testing::fixture_dir(c.family), no_tokenizer()));
  expect_model_fused(m, c.want, false);
  expect_model_fused(m, c.want, true);
}

INSTANTIATE_TEST_SUITE_P(
    Hf, AttentionFixtures,
    ::testing::Values(FixtureCase{"llama", {}}, FixtureCase{"llama3_scaled", {}}, FixtureCase{"mistral", {}},
                      FixtureCase{"qwen2", {}}, FixtureCase{"qwen3", {}}, FixtureCase{"gpt2", {}},
                      FixtureCase{"gemma2", {.softcap = 50.0}}, FixtureCase{"bloom", {.head_mask = true}},
                      FixtureCase{"deepseek_v2", {.mla = true}},
                      FixtureCase{"deepseek_v2_qlora", {.mla = true}}),
    [](const ::testing::TestParamInfo<FixtureCase>& i) { return std::string(i.param.family); });

}  // namespace
}  // namespace kvf
