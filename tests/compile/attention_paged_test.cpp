// The paged-key form of the attention rewrite (docs/attention.md, "Paged keys"): the chain
// ops::attention_paged emits, whose keys and values are gathered views
// transpose(gather(pool, read), (0,2,1,3)) of the written pools, becomes one Attention eqn
// that reads the pools themselves through the read map (has_read), and dce leaves no gather
// or transpose of a pool. The oracle gives what the chain gave (native 1e-5, f64 1e-12) and
// the pools come back bit for bit. Near-misses keep the gathered views as the operands (the
// form that fused before the paged key existed) with the same results: a read map that is
// not a read-map slot declared over the pool (a constant, a computed index, an undeclared
// slot, a write map, a slot over another pool size), k and v through different maps, and a
// map that indexes another axis of the view.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compile/attention_match.h"
#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using eval::Precision;
using ir::Builder;
using ir::OpKind;
using ir::V;
namespace ops = ir::ops;

constexpr int64_t kBlock = 16;

// How the hand-built chain departs from ops::attention_paged (all off: the same chain).
enum class ReadKind {
  kSlot,           // map_slot(kSlotMap, [B, cap], S): the proof
  kConstant,       // an i32 constant holding the same words
  kComputed,       // min(slot, S - 1): in range, but computed, so not what a binder checks
  kUndeclared,     // slot(kSlotMap) with no declared pool size
  kWriteMap,       // a write-map slot [B, cap] over S rows: -1 is one of its words
  kOtherPoolSize,  // map_slot(kSlotMap, [B, cap], 2 S): words up to 2 S pass the bind
};

struct PagedCase {
  const char* name;
  int64_t batch, hq, hkv, t, cap, d, dv;
  DType kv = DType::kF32;
  bool mask = true;
  double softcap = 0;
  bool live = true;  // attention_live over the views (the paged chain); else attention_prefill
  ReadKind read = ReadKind::kSlot;
  bool v_own_map = false;      // v gathered through a second map (an equal constant)
  bool keys_on_heads = false;  // the view is transpose(gather, (0,1,2,3)): the map picks heads
  bool latent = false;  // ops::attention_latent_paged: pools c [S,1,d] and k_rot [S,1,dv], q d + dv wide
};

std::ostream& operator<<(std::ostream& os, const PagedCase& c) { return os << c.name; }

struct Built {
  ir::Graph graph;
  eval::SlotBindings slots;
  eval::StateStore state;
  int64_t pool = 0;
};

// Row b starts at position 3 b + 1 (every row has history), owns cap / 16 shuffled blocks of
// the pools and two blocks belong to nobody. With a live length the pools hold random
// history where a row's read map names a position before its start and NaN everywhere
// else, so an op that reads a key it should not (a slot past the live length, a spare
// block) makes the output NaN; without one every key is visited, and every row is stale
// random data.
class PagedBuilder {
 public:
  PagedBuilder(const PagedCase& c, std::mt19937_64& rng) : c_(c), rng_(rng), b_(c.name) {}

  Built build() {
    const int64_t per_row = c_.cap / kBlock;
    std::vector<int32_t> blocks(static_cast<size_t>(c_.batch * per_row + 2));
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    std::shuffle(blocks.begin(), blocks.end(), rng_);
    pool_ = static_cast<int64_t>(blocks.size()) * kBlock;
    auto slot = [&](int64_t r, int64_t p) {
      return static_cast<int32_t>(blocks[static_cast<size_t>(r * per_row + p / kBlock)] * kBlock + p % kBlock);
    };
    std::vector<int32_t> pos, write, read;
    for (int64_t r = 0; r < c_.batch; ++r) {
      for (int64_t j = 0; j < c_.t; ++j) {
        pos.push_back(static_cast<int32_t>(start(r) + j));
        write.push_back(slot(r, start(r) + j));
      }
      for (int64_t p = 0; p < c_.cap; ++p) read.push_back(slot(r, p));
    }
    const int64_t n = c_.batch * c_.t;
    built_.slots[ir::Slot::kPos] = testing::must(Buffer::i32({n}, pos));
    const V pos_v = b_.slot(ir::Slot::kPos, DType::kI32, {n});
    const Buffer read_buf = testing::must(Buffer::i32({c_.batch, c_.cap}, read));
    const Buffer write_buf = testing::must(Buffer::i32({n}, write));
    V write_v;
    if (c_.read == ReadKind::kWriteMap) {  // the write map slot holds the reads; writes are a constant
      write_v = testing::input(b_, "write", write_buf);
      built_.slots[ir::Slot::kWriteMap] = read_buf;
    } else {
      write_v = b_.map_slot(ir::Slot::kWriteMap, {n}, pool_);
      built_.slots[ir::Slot::kWriteMap] = write_buf;
    }
    if (c_.read != ReadKind::kConstant && c_.read != ReadKind::kWriteMap) built_.slots[ir::Slot::kSlotMap] = read_buf;
    const V read_v = read_value(read_buf);

    const int64_t dq = c_.latent ? c_.d + c_.dv : c_.d;
    const V q = testing::input(b_, "q", testing::random_buffer(rng_, {c_.batch, c_.hq, c_.t, dq}));
    const V k_new = testing::input(b_, "k_new", testing::random_buffer(rng_, {c_.batch, c_.hkv, c_.t, c_.d}));
    const V v_new = testing::input(b_, "v_new", testing::random_buffer(rng_, {c_.batch, c_.hkv, c_.t, c_.dv}));
    const V k_pool = b_.state("k_pool", c_.kv, {pool_, c_.hkv, c_.d}, ir::StateRole::kKeyCache, 0);
    const V v_pool = b_.state("v_pool", c_.kv, {pool_, c_.hkv, c_.dv}, ir::StateRole::kValueCache, 0);
    built_.state["k_pool"] = history({pool_, c_.hkv, c_.d}, slot);
    built_.state["v_pool"] = history({pool_, c_.hkv, c_.dv}, slot);
    V mask;
    if (c_.mask) mask = b_.reshape(ops::causal_mask(pos_v, c_.cap), {c_.batch, 1, c_.t, c_.cap});
    const ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(c_.d)), .softcap = c_.softcap};
    const V pos2 = b_.reshape(pos_v, {c_.batch, c_.t});
    V out;
    if (hand_built()) {
      out = hand_chain(q, k_new, v_new, k_pool, v_pool, write_v, read_v, read_buf, pos2, mask, opts);
    } else if (c_.latent) {
      out = ops::attention_latent_paged(q, k_new, v_new, k_pool, v_pool, write_v, read_v, pos2, mask, opts).out;
    } else {
      out = ops::attention_paged(q, k_new, v_new, k_pool, v_pool, write_v, read_v, pos2, mask, opts).out;
    }
    b_.output("out", out);
    built_.graph = testing::must(b_.finish());
    built_.pool = pool_;
    return std::move(built_);
  }

 private:
  int64_t start(int64_t r) const { return 3 * r + 1; }
  bool hand_built() const { return !c_.live || c_.v_own_map || c_.keys_on_heads; }

  V read_value(const Buffer& words) {
    switch (c_.read) {
      case ReadKind::kSlot: return b_.map_slot(ir::Slot::kSlotMap, {c_.batch, c_.cap}, pool_);
      case ReadKind::kConstant: return testing::input(b_, "read", words);
      case ReadKind::kComputed: {
        const V s = b_.map_slot(ir::Slot::kSlotMap, {c_.batch, c_.cap}, pool_);
        return b_.binary(OpKind::kMin, s, b_.like(s, static_cast<double>(pool_ - 1)));
      }
      case ReadKind::kUndeclared: return b_.slot(ir::Slot::kSlotMap, DType::kI32, {c_.batch, c_.cap});
      case ReadKind::kWriteMap: return b_.map_slot(ir::Slot::kWriteMap, {c_.batch, c_.cap}, pool_);
      case ReadKind::kOtherPoolSize: return b_.map_slot(ir::Slot::kSlotMap, {c_.batch, c_.cap}, 2 * pool_);
    }
    return {};
  }

  template <class Slot>
  Buffer history(Shape shape, const Slot& slot) {
    const Buffer h = testing::random_buffer(rng_, shape);
    Buffer buf = h;
    buf.dtype = c_.kv;
    for (double& x : buf.data) x = c_.live ? std::numeric_limits<double>::quiet_NaN() : round_to_dtype(c_.kv, x);
    const int64_t width = shape[1] * shape[2];
    for (int64_t r = 0; r < c_.batch; ++r)
      for (int64_t p = 0; p < start(r); ++p)
        for (int64_t i = 0; i < width; ++i) {
          const auto at = static_cast<size_t>(slot(r, p) * width + i);
          buf.data[at] = round_to_dtype(c_.kv, h.data[at]);
        }
    return buf;
  }

  // ops::attention_paged written out, with the departures the case asks for.
  V hand_chain(V q, V k_new, V v_new, V k_pool, V v_pool, V write, V read, const Buffer& read_words, V pos2, V mask,
               const ops::AttnOpts& opts) {
    auto rows = [&](V x, V pool) {
      V r = b_.reshape(b_.transpose(x, {0, 2, 1, 3}), {x.dim(0) * x.dim(2), x.dim(1), x.dim(3)});
      return r.dtype() == pool.dtype() ? r : b_.cast(r, pool.dtype());
    };
    const V kp = b_.scatter_update(k_pool, write, rows(k_new, k_pool));
    const V vp = b_.scatter_update(v_pool, write, rows(v_new, v_pool));
    b_.donate(k_pool, kp);
    b_.donate(v_pool, vp);
    const std::vector<int64_t> perm = c_.keys_on_heads ? std::vector<int64_t>{0, 1, 2, 3} : std::vector<int64_t>{0, 2, 1, 3};
    auto view = [&](V pool, V map) {
      V x = b_.transpose(b_.gather(pool, map), perm);
      return x.dtype() == q.dtype() ? x : b_.cast(x, q.dtype());
    };
    const V v_map = c_.v_own_map ? testing::input(b_, "read_v", read_words) : read;
    const V k = view(kp, read), v = view(vp, v_map);
    if (!c_.live) return ops::attention_prefill(q, k, v, mask, opts);
    const V len = b_.reshape(b_.slice_axis(pos2, 1, c_.t - 1, c_.t), {c_.batch}) + b_.like(pos2, 1.0);
    return ops::attention_live(q, k, v, len, mask, opts);
  }

  const PagedCase& c_;
  std::mt19937_64& rng_;
  Builder b_;
  Built built_;
  int64_t pool_ = 0;
};

// ---- running before and after

struct RunResult {
  eval::Outputs outputs;
  eval::StateStore state;
};

RunResult run(const ir::Graph& g, const Built& in, Precision p) {
  eval::StateStore state = in.state;
  eval::Oracle oracle({.precision = p, .threads = 1});
  Result<eval::Outputs> out = oracle.run(g, in.slots, state);
  EXPECT_TRUE(out.ok()) << g.name << ": " << out.error().to_string();
  return {out.ok() ? std::move(*out) : eval::Outputs{}, std::move(state)};
}

// The outputs agree (native 1e-5, f64 1e-12 relative) and come back whole and finite; the
// published pools agree bit for bit.
void expect_same_results(const ir::Graph& before, const ir::Graph& after, const Built& in) {
  for (Precision p : {Precision::kNative, Precision::kF64}) {
    SCOPED_TRACE(p == Precision::kF64 ? "f64" : "native");
    const RunResult a = run(before, in, p), b = run(after, in, p);
    ASSERT_TRUE(a.outputs.count("out") && b.outputs.count("out"));
    for (double x : b.outputs.at("out").data) ASSERT_TRUE(std::isfinite(x)) << "a NaN reached the output";
    EXPECT_LE(testing::rel_error(b.outputs.at("out").data, a.outputs.at("out").data), p == Precision::kF64 ? 1e-12 : 1e-5);
    for (const auto& [name, want] : a.state) EXPECT_TRUE(testing::same_values(b.state.at(name).data, want.data)) << name;
  }
}

ir::Graph attention_only(const ir::Graph& g) {
  ir::Graph out = testing::must(compile::attention_pass().run(g));
  EXPECT_TRUE(ir::verify(out).ok());
  return out;
}

ir::Graph all_passes(const ir::Graph& g) { return testing::must(compile::run_passes(g, compile::default_passes())).graph; }

const ir::Eqn* only_attention(const ir::Graph& g) {
  const ir::Eqn* found = nullptr;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op != OpKind::kAttention) continue;
    EXPECT_EQ(found, nullptr) << "a second attention eqn";
    found = &e;
  }
  return found;
}

// The matcher's verdict at the graph's last matmul.
compile::attention::MatchResult match_last(const ir::Graph& g) {
  const compile::Uses uses(g);
  size_t root = 0;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op == OpKind::kMatMul) root = i;
  }
  return compile::attention::match_attention(g, uses, root);
}

// ---- the paged-key form

const PagedCase kForms[] = {
    {"decode_gqa2", 3, 4, 2, 1, 32, 8, 8},
    {"decode_rep4_f16", 2, 8, 2, 1, 48, 8, 8, DType::kF16},
    {"chunk_mha_dv6", 2, 2, 2, 3, 32, 8, 6},
    {"chunk_softcap_f16", 2, 4, 1, 2, 32, 8, 8, DType::kF16, true, 4.0},
    {"decode_no_mask", 2, 4, 2, 1, 32, 8, 8, DType::kF32, false},
    {"prefill_form_no_len", 2, 4, 2, 2, 32, 8, 8, DType::kF32, true, 0, false},  // attention_prefill over the views
};

class PagedForms : public ::testing::TestWithParam<PagedCase> {
 protected:
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};
};

TEST_P(PagedForms, ReadsThePoolsThroughTheMap) {
  const PagedCase& c = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  const Built built = PagedBuilder(c, rng).build();
  ASSERT_EQ(testing::count_op(built.graph, OpKind::kGather), 2);

  const ir::Graph fused = attention_only(built.graph);
  const ir::Eqn* e = only_attention(fused);
  ASSERT_NE(e, nullptr) << match_last(built.graph).why_not;
  const ir::AttnParams& p = e->params.attn;
  EXPECT_TRUE(p.has_read) << match_last(built.graph).match->kept_view;
  EXPECT_EQ(p.n_rep, c.hq / c.hkv);
  EXPECT_EQ(p.softcap, c.softcap);
  EXPECT_EQ(p.has_mask, c.mask);
  EXPECT_EQ(p.has_len, c.live);
  EXPECT_FALSE(p.has_shared);
  ASSERT_EQ(e->in.size(), 4u + p.has_mask + p.has_len);
  EXPECT_EQ(testing::operand_origin(fused, e->in[0]), "q");
  EXPECT_EQ(testing::operand_origin(fused, e->in[1]), "scatter_update");  // the written pools, in their stored dtype
  EXPECT_EQ(testing::operand_origin(fused, e->in[2]), "scatter_update");
  EXPECT_EQ(fused.type(e->in[1]), (ir::TensorType{c.kv, {built.pool, c.hkv, c.d}}));
  EXPECT_EQ(fused.type(e->in[2]), (ir::TensorType{c.kv, {built.pool, c.hkv, c.dv}}));
  if (p.has_len) {
    EXPECT_EQ(testing::operand_origin(fused, e->in[e->in.size() - 2]), "max");  // the index guard's clamp
  }
  EXPECT_EQ(testing::operand_origin(fused, e->in.back()), "slot_map");
  EXPECT_NE(ir::print(fused).find("paged_key]"), std::string::npos);
  expect_same_results(built.graph, fused, built);

  // After every pass, dce has dropped the gathered views: no gather, no matmul.
  const ir::Graph compiled = all_passes(built.graph);
  const ir::Eqn* ce = only_attention(compiled);
  ASSERT_NE(ce, nullptr);
  EXPECT_TRUE(ce->params.attn.has_read);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kGather), 0) << ir::print(compiled);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kMatMul), 0);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kScatterUpdate), 2);
  expect_same_results(built.graph, compiled, built);
  EXPECT_EQ(testing::count_op(attention_only(compiled), OpKind::kAttention), 1);  // nothing more to fuse
}

INSTANTIATE_TEST_SUITE_P(Forms, PagedForms, ::testing::ValuesIn(kForms),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return std::string(i.param.name); });

// MLA's latent pools (ops::attention_latent_paged, docs/kv.md): c [S, 1, d] is the key's
// first part and the whole value, k_rot [S, 1, dv] the key's rest. The op reads both pools
// in place through the map: k and v are the one written c pool, k_shared the k_rot pool.
TEST(PagedLatent, ReadsBothPoolsThroughTheMap) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const PagedCase cases[] = {
      {.name = "latent_decode", .batch = 3, .hq = 4, .hkv = 1, .t = 1, .cap = 32, .d = 16, .dv = 4, .latent = true},
      {.name = "latent_chunk_f16", .batch = 2, .hq = 8, .hkv = 1, .t = 3, .cap = 48, .d = 32, .dv = 8, .kv = DType::kF16,
       .latent = true},
  };
  for (const PagedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Built built = PagedBuilder(c, rng).build();
    const ir::Graph fused = attention_only(built.graph);
    const ir::Eqn* e = only_attention(fused);
    ASSERT_NE(e, nullptr) << match_last(built.graph).why_not;
    const ir::AttnParams& p = e->params.attn;
    EXPECT_TRUE(p.has_read) << match_last(built.graph).match->kept_view;
    EXPECT_TRUE(p.has_shared);
    EXPECT_EQ(p.n_rep, c.hq);
    EXPECT_EQ(e->in[1], e->in[2]);  // the value is the key's latent part: one pool, read once
    EXPECT_EQ(testing::operand_origin(fused, e->in[1]), "scatter_update");
    EXPECT_EQ(testing::operand_origin(fused, e->in[3]), "scatter_update");
    EXPECT_EQ(fused.type(e->in[1]), (ir::TensorType{c.kv, {built.pool, 1, c.d}}));
    EXPECT_EQ(fused.type(e->in[3]), (ir::TensorType{c.kv, {built.pool, 1, c.dv}}));
    EXPECT_EQ(testing::operand_origin(fused, e->in.back()), "slot_map");
    EXPECT_NE(ir::print(fused).find("split_key, mask, live_len, paged_key]"), std::string::npos);
    expect_same_results(built.graph, fused, built);

    const ir::Graph compiled = all_passes(built.graph);
    ASSERT_NE(only_attention(compiled), nullptr);
    for (OpKind op : {OpKind::kGather, OpKind::kConcat, OpKind::kMatMul}) {
      EXPECT_EQ(testing::count_op(compiled, op), 0) << ir::op_name(op) << " left:\n" << ir::print(compiled);
    }
    expect_same_results(built.graph, compiled, built);
  }
}

// ---- near-misses: the gathered views stay the operands, and the results do not change

struct NearMissCase {
  PagedCase c;
  const char* reason;  // what kept_view says
};

std::ostream& operator<<(std::ostream& os, const NearMissCase& n) { return os << n.c.name; }

const NearMissCase kNearMisses[] = {
    {{"read_is_a_constant", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, true, ReadKind::kConstant},
     "is not a read-map slot declared over the pool's"},
    {{"read_is_computed", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, true, ReadKind::kComputed},
     "is not a read-map slot declared over the pool's"},
    {{"read_slot_undeclared", 2, 4, 2, 2, 32, 8, 8, DType::kF16, true, 0, true, ReadKind::kUndeclared},
     "is not a read-map slot declared over the pool's"},
    {{"read_is_a_write_map", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, true, ReadKind::kWriteMap},
     "is not a read-map slot declared over the pool's"},
    {{"read_over_another_pool", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, true, ReadKind::kOtherPoolSize},
     "is not a read-map slot declared over the pool's"},
    {{"k_and_v_through_two_maps", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, true, ReadKind::kSlot, true},
     "k and v are read through different maps"},
    // The map indexes the view's head axis: with cap == Hkv the identity transpose types too.
    {{"gather_along_another_axis", 2, 16, 16, 1, 16, 8, 8, DType::kF32, false, 0, false, ReadKind::kSlot, false, true},
     "is not transposed (0,2,1,3)"},
};

class PagedNearMiss : public ::testing::TestWithParam<NearMissCase> {
 protected:
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};
};

TEST_P(PagedNearMiss, KeepsTheGatheredViews) {
  const NearMissCase& n = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  const Built built = PagedBuilder(n.c, rng).build();
  const compile::attention::MatchResult m = match_last(built.graph);
  ASSERT_TRUE(m.match.has_value()) << m.why_not;  // the attention itself still fuses
  EXPECT_FALSE(m.match->params.has_read);
  EXPECT_NE(m.match->kept_view.find(n.reason), std::string::npos) << "kept for: " << m.match->kept_view;

  const ir::Graph fused = attention_only(built.graph);
  const ir::Eqn* e = only_attention(fused);
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->params.attn.has_read);
  EXPECT_EQ(e->in.size(), 3u + e->params.attn.has_mask + e->params.attn.has_len);
  // k and v: the gathered views as today, [B, Hkv, Lk, D] in the pools' dtype (an f16 view is
  // read as stored, without its widening cast).
  EXPECT_EQ(testing::operand_origin(fused, e->in[1]), "transpose");
  EXPECT_EQ(testing::operand_origin(fused, e->in[2]), "transpose");
  EXPECT_EQ(fused.type(e->in[1]).shape.size(), 4u);
  EXPECT_EQ(fused.type(e->in[1]).dtype, n.c.kv);
  expect_same_results(built.graph, fused, built);

  const ir::Graph compiled = all_passes(built.graph);
  ASSERT_NE(only_attention(compiled), nullptr);
  EXPECT_FALSE(only_attention(compiled)->params.attn.has_read);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kGather), 2) << "the views are still gathered";
  expect_same_results(built.graph, compiled, built);
}

INSTANTIATE_TEST_SUITE_P(NearMisses, PagedNearMiss, ::testing::ValuesIn(kNearMisses),
                         [](const ::testing::TestParamInfo<NearMissCase>& i) { return std::string(i.param.c.name); });

// The control for the hand-built chain: written out exactly as ops::attention_paged, and the
// prefill form over the views, it fuses the paged key.
TEST(PagedControl, TheHandChainIsFused) {
  std::mt19937_64 rng(testing::test_seed());
  const PagedCase c{"hand_prefill", 2, 4, 2, 1, 32, 8, 8, DType::kF32, true, 0, false};
  const Built built = PagedBuilder(c, rng).build();
  const compile::attention::MatchResult m = match_last(built.graph);
  ASSERT_TRUE(m.match.has_value()) << m.why_not;
  EXPECT_TRUE(m.match->params.has_read) << m.match->kept_view;
  EXPECT_TRUE(m.match->kept_view.empty());
}

// The oracle refuses a hand-built paged eqn whose read map names a row outside the pool,
// rather than read past it (the rewrite only forms one over a checked map slot).
TEST(PagedOracle, RefusesAReadMapOutsideThePool) {
  std::mt19937_64 rng(testing::test_seed());
  for (int32_t bad : {4, -1}) {
    Builder g("hand_paged");
    const V qq = testing::input(g, "q", testing::random_buffer(rng, {1, 2, 1, 8}));
    const V kk = testing::input(g, "k", testing::random_buffer(rng, {4, 2, 8}));
    const V vv = testing::input(g, "v", testing::random_buffer(rng, {4, 2, 8}));
    const V read = testing::input(g, "read", testing::must(Buffer::i32({1, 3}, {0, bad, 2})));
    ir::Params p;
    p.attn.scale = 0.3;
    p.attn.n_rep = 1;
    p.attn.has_read = true;
    g.output("out", g.emit(OpKind::kAttention, {qq, kk, vv, read}, p));
    const ir::Graph graph = testing::must(g.finish());
    Result<eval::Outputs> r = testing::run_graph(graph, {}, Precision::kNative);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
    EXPECT_NE(r.error().message().find("outside the pool of 4 rows"), std::string::npos) << r.error().to_string();
  }
}

}  // namespace
}  // namespace kvf
