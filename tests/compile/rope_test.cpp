// rope: ops::apply_rope's chain (half and interleaved, whole head and partial rotary, on
// a head tensor, a slice of q and a one-head key) becomes one Rope eqn that gives the
// chain's bits on the oracle and the rotation of a plain double loop; hand-built chains
// that differ in one place (swapped tables, operands, slices, an extra reader) stay.
#include <gtest/gtest.h>

#include <cmath>

#include "compile/passes.h"
#include "ir/printer.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::RopeLayout;
using ir::V;
using testing::count_op;
using testing::find_eqn;
using testing::must;

ir::Graph rope(const ir::Graph& g) { return must(compile::rope_pass().run(g)); }

struct RopeCase {
  const char* name;
  RopeLayout layout;
  Shape x_shape;     // what apply_rope turns: [B, H, T, D]
  int64_t rot;       // rotary dim (== D: whole head)
  int64_t q_offset;  // > 0: x is q[..., q_offset:] of a wider q, as deepseek2's q_rot
};

struct Traced {
  ir::Graph graph;
  eval::Buffer q;  // the input behind x (x itself, or the wider q)
  std::vector<float> inv_freq;
};

eval::SlotBindings positions(std::mt19937_64& rng, int64_t t) {
  std::vector<int32_t> pos(static_cast<size_t>(t));
  for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 200);
  return {{ir::Slot::kPos, must(eval::Buffer::i32({t}, pos))}};
}

Traced trace(const RopeCase& c, std::mt19937_64& rng) {
  Shape qs = c.x_shape;
  qs.back() += c.q_offset;
  Traced t{ir::Graph{}, testing::random_buffer(rng, qs), {}};
  ir::Builder b("rope");
  const int64_t n = c.x_shape[2];
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  const ir::ops::RopeSpec spec{.head_dim = c.x_shape.back(), .rotary_dim = c.rot, .theta = 10000.0, .layout = c.layout, .inv_freq = {}};
  t.inv_freq = ir::ops::rope_inv_freq(spec);
  const ir::ops::RopeTables tables = ir::ops::rope_tables(pos, spec);
  V x = testing::input(b, "q", t.q);
  if (c.q_offset > 0) x = b.slice_axis(x, -1, c.q_offset, qs.back());
  b.output("out", ir::ops::apply_rope(x, tables));
  t.graph = must(b.finish());
  return t;
}

// The rotation in plain double loops: angles as rope_tables rounds them (f32), then exact.
std::vector<double> reference(const RopeCase& c, const Traced& t, const eval::SlotBindings& slots) {
  const Shape& s = c.x_shape;
  const int64_t d = s[3], width = d + c.q_offset, half = c.rot / 2, rows = s[0] * s[1] * s[2];
  const eval::Buffer& pos = slots.at(ir::Slot::kPos);
  std::vector<double> out(static_cast<size_t>(rows * d));
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = t.q.data.data() + r * width + c.q_offset;
    double* o = out.data() + r * d;
    for (int64_t i = 0; i < d; ++i) o[i] = x[i];
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos.data[static_cast<size_t>(r % s[2])]) * t.inv_freq[static_cast<size_t>(i)];
      const double cs = std::cos(static_cast<double>(angle)), sn = std::sin(static_cast<double>(angle));
      const bool pairs = c.layout == RopeLayout::kInterleaved;
      const int64_t i0 = pairs ? 2 * i : i, i1 = pairs ? 2 * i + 1 : i + half;
      o[i0] = x[i0] * cs - x[i1] * sn;
      o[i1] = x[i1] * cs + x[i0] * sn;
    }
  }
  return out;
}

class RopeChain : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeChain, BecomesOneRopeWithTheChainsBits) {
  const RopeCase& c = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const Traced t = trace(c, rng);
  const ir::Graph r = rope(t.graph);
  ASSERT_EQ(count_op(r, OpKind::kRope), 1) << ir::print(r);
  // Left: the angle table (cast, reshape(s), mul, cos, sin) and the slice of a wider q.
  EXPECT_EQ(count_op(r, OpKind::kConcat), 0) << ir::print(r);
  EXPECT_EQ(count_op(r, OpKind::kSub), 0);
  EXPECT_EQ(count_op(r, OpKind::kAdd), 0);
  EXPECT_EQ(count_op(r, OpKind::kMul), 1);
  EXPECT_EQ(count_op(r, OpKind::kSlice), c.q_offset > 0 ? 1 : 0);
  const ir::Eqn& e = *find_eqn(r, OpKind::kRope);
  EXPECT_EQ(e.params.rope.layout, c.layout);
  EXPECT_EQ(e.params.rope.rotary_dim, c.rot);
  EXPECT_EQ(r.type(e.in[0]).shape, c.x_shape);
  EXPECT_EQ(r.eqns[static_cast<size_t>(r.value(e.in[1]).producer)].op, OpKind::kCos);
  EXPECT_EQ(r.eqns[static_cast<size_t>(r.value(e.in[2]).producer)].op, OpKind::kSin);

  for (int trial = 0; trial < 3; ++trial) {
    const eval::SlotBindings slots = positions(rng, c.x_shape[2]);
    const eval::Outputs before = must(testing::run_graph(t.graph, slots, eval::Precision::kNative));
    const eval::Outputs after = must(testing::run_graph(r, slots, eval::Precision::kNative));
    ASSERT_TRUE(testing::same_bits(before.at("out"), after.at("out")));
    EXPECT_LE(testing::rel_error(after.at("out").data, reference(c, t, slots)), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RopeChain,
    ::testing::Values(RopeCase{"half", RopeLayout::kHalf, {1, 3, 5, 8}, 8, 0},
                      RopeCase{"interleaved", RopeLayout::kInterleaved, {1, 3, 5, 8}, 8, 0},
                      RopeCase{"half_partial", RopeLayout::kHalf, {1, 2, 4, 12}, 4, 0},
                      RopeCase{"interleaved_partial", RopeLayout::kInterleaved, {1, 2, 4, 12}, 6, 0},
                      RopeCase{"half_q_slice", RopeLayout::kHalf, {1, 4, 3, 4}, 4, 6},
                      RopeCase{"interleaved_q_slice", RopeLayout::kInterleaved, {1, 4, 3, 4}, 4, 6},
                      RopeCase{"half_one_head_key", RopeLayout::kHalf, {1, 1, 6, 4}, 4, 0},
                      RopeCase{"half_single_token", RopeLayout::kHalf, {1, 2, 1, 6}, 6, 0}),
    [](const ::testing::TestParamInfo<RopeCase>& info) { return std::string(info.param.name); });

// canonicalize folds reshape chains that run through an interleaved rope: the reshape back
// into repeat_kv's first reshape (a key in a full forward), and a tracer's reshape of x
// into the pairs reshape (deepseek2's k_rot). The rope is still found, with a reshape on
// either side, and keeps the bits.
TEST(RopeAfterFolds, InterleavedChainsWhoseReshapesWereFolded) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 4, rot = 8;
  ir::Builder b("folded");
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  const ir::ops::RopeTables t = ir::ops::rope_tables(pos, {.head_dim = rot, .rotary_dim = 0, .theta = 10000.0, .layout = RopeLayout::kInterleaved, .inv_freq = {}});
  const V k = testing::input(b, "k", testing::random_buffer(rng, {1, 2, n, rot}));
  b.output("k_rep", ir::ops::repeat_kv(ir::ops::apply_rope(k, t), 3));
  const V kv_a = testing::input(b, "kv_a", testing::random_buffer(rng, {1, n, 5 + rot}));
  b.output("k_rot", ir::ops::apply_rope(b.reshape(b.slice_axis(kv_a, -1, 5, 5 + rot), {1, 1, n, rot}), t));
  const ir::Graph g = must(b.finish());
  const ir::Graph canon = must(compile::canonicalize_pass().run(g));
  ASSERT_EQ(count_op(canon, OpKind::kConcat), 2) << ir::print(canon);  // the two rotations
  const ir::Graph r = rope(canon);
  EXPECT_EQ(count_op(r, OpKind::kRope), 2) << ir::print(r);
  EXPECT_EQ(count_op(r, OpKind::kConcat), 0);
  EXPECT_EQ(count_op(r, OpKind::kSub), 0);
  const eval::SlotBindings slots = positions(rng, n);
  testing::expect_same_outputs(g, r, slots);
}

// ---- near misses: apply_rope's half chain, written out with one thing changed

struct Change {
  bool swap_tables = false;    // x1·sin − x2·cos, x2·sin + x1·cos
  bool swap_sub = false;       // x2·sin − x1·cos
  bool other_angles = false;   // sin of different angles than cos
  bool wrong_slice = false;    // x2 sliced from another tensor
  bool extra_reader = false;   // x1·cos is also an output
};

ir::Graph half_chain(const Change& ch, std::mt19937_64& rng) {
  ir::Builder b("near_miss");
  const int64_t n = 4, half = 3, rot = 6;
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  const ir::ops::RopeTables t = ir::ops::rope_tables(pos, {.head_dim = rot, .rotary_dim = 0, .theta = 10000.0, .layout = RopeLayout::kHalf, .inv_freq = {}});
  V cos = t.cos, sin = ch.other_angles ? b.unary(OpKind::kSin, b.unary(OpKind::kNeg, t.sin)) : t.sin;
  if (ch.swap_tables) std::swap(cos, sin);
  const V x = testing::input(b, "x", testing::random_buffer(rng, {1, 2, n, rot}));
  const V y = testing::input(b, "y", testing::random_buffer(rng, {1, 2, n, rot}));
  const V x1 = b.slice_axis(x, -1, 0, half);
  const V x2 = b.slice_axis(ch.wrong_slice ? y : x, -1, half, rot);
  const V x1c = x1 * cos;
  const V x2s = x2 * sin;
  const V first = ch.swap_sub ? x2s - x1c : x1c - x2s;
  const V x2c = x2 * cos;
  const V x1s = x1 * sin;
  b.output("out", b.concat({first, x2c + x1s}, -1));
  if (ch.extra_reader) b.output("x1c", x1c);
  return must(b.finish());
}

ir::Graph interleaved_odd_first(std::mt19937_64& rng) {
  ir::Builder b("odd_first");
  const int64_t n = 3, half = 2, rot = 4;
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  const ir::ops::RopeTables t = ir::ops::rope_tables(pos, {.head_dim = rot, .rotary_dim = 0, .theta = 10000.0, .layout = RopeLayout::kInterleaved, .inv_freq = {}});
  const V x = testing::input(b, "x", testing::random_buffer(rng, {1, 2, n, rot}));
  const V xr = b.reshape(x, {1, 2, n, half, 2});
  const V even = b.slice_axis(xr, -1, 1, 2);  // swapped
  const V odd = b.slice_axis(xr, -1, 0, 1);
  const V first = even * t.cos - odd * t.sin;
  const V es = even * t.sin;
  const V second = es + odd * t.cos;
  b.output("out", b.reshape(b.concat({first, second}, -1), {1, 2, n, rot}));
  return must(b.finish());
}

TEST(RopeNearMiss, ControlTheUnchangedChainIsRewritten) {
  std::mt19937_64 rng(testing::test_seed());
  EXPECT_EQ(count_op(rope(half_chain({}, rng)), OpKind::kRope), 1);
}

TEST(RopeNearMiss, ChangedChainsKeepTheirEqns) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  auto change = [](bool Change::*field) {
    Change c;
    c.*field = true;
    return c;
  };
  const std::pair<const char*, Change> cases[] = {
      {"swapped sin/cos", change(&Change::swap_tables)},       {"swapped sub", change(&Change::swap_sub)},
      {"other angles", change(&Change::other_angles)},         {"slice of another tensor", change(&Change::wrong_slice)},
      {"extra reader", change(&Change::extra_reader)},
  };
  for (const auto& [what, change] : cases) {
    const ir::Graph g = half_chain(change, rng);
    const ir::Graph r = rope(g);
    EXPECT_EQ(count_op(r, OpKind::kRope), 0) << what << "\n" << ir::print(r);
    EXPECT_EQ(r.eqns.size(), g.eqns.size()) << what;
  }
  const ir::Graph odd = interleaved_odd_first(rng);
  EXPECT_EQ(count_op(rope(odd), OpKind::kRope), 0) << "even/odd swapped";
}

// Tables of T rows against x of one row would broadcast x: not a rope of x.
TEST(RopeNearMiss, TablesThatBroadcastXStay) {
  std::mt19937_64 rng(testing::test_seed());
  ir::Builder b("broadcast");
  const V pos = b.slot(ir::Slot::kPos, DType::kI32, {4});
  const ir::ops::RopeTables t = ir::ops::rope_tables(pos, {.head_dim = 4, .rotary_dim = 0, .theta = 10000.0, .layout = RopeLayout::kHalf, .inv_freq = {}});
  const V x = testing::input(b, "x", testing::random_buffer(rng, {1, 2, 1, 4}));
  b.output("out", ir::ops::apply_rope(x, t));
  const ir::Graph g = must(b.finish());
  EXPECT_EQ(count_op(rope(g), OpKind::kRope), 0);
}

}  // namespace
}  // namespace kvf
