// rope (exact): finds ops::apply_rope's chain, in both layouts and with a partial rotary
// prefix, fed by the cos/sin tables of ops::rope_tables, and replaces it by one Rope eqn
// (x, cos, sin). eval_rope rounds each product and sum as the chain does, so the rewrite
// keeps every bit. The chains it reads (ops/rope.cpp), with h = rot/2:
//   half:        concat(x1·cos − x2·sin, x2·cos + x1·sin [, x[..., rot:]])
//                x1 = x[..., :h], x2 = x[..., h:rot]
//   interleaved: [concat(] reshape(concat(e·cos − o·sin, e·sin + o·cos), [..., rot])
//                [, x[..., rot:])], e|o = reshape(x[..., :rot], [..., h, 2])[..., 0|1]
#include <algorithm>
#include <optional>

#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

// data · table, where the table is a cos or sin eqn's value; the product keeps data's type.
struct Term {
  ValueId data = -1, table = -1;
  OpKind table_op = OpKind::kCos;
};

std::optional<Term> product(const ir::Graph& g, Chain& c, ValueId v) {
  const Eqn* m = c.take(v, OpKind::kMul);
  if (!m) return std::nullopt;
  for (size_t k = 0; k < 2; ++k) {
    const Eqn* t = producer(g, m->in[k]);
    if (!t || (t->op != OpKind::kCos && t->op != OpKind::kSin)) continue;
    const ValueId data = m->in[1 - k];
    if (g.type(data) != g.type(m->out)) return std::nullopt;  // the table must not broadcast data
    return Term{data, m->in[k], t->op};
  }
  return std::nullopt;
}

// What a rotation of pairs (a, b) reads: a·cos − b·sin and the two terms of the sum.
struct Rotation {
  ValueId a = -1, b = -1, cos = -1, sin = -1;
};

// first = a·cos − b·sin and second = a·sin + b·cos, with the sum's terms in either order
// (half writes b·cos + a·sin, pairs a·sin + b·cos; IEEE addition commutes bit for bit,
// subtraction does not, so its order is checked).
std::optional<Rotation> rotation(const ir::Graph& g, Chain& c, ValueId first, ValueId second) {
  const Eqn* sub = c.take(first, OpKind::kSub);
  const Eqn* add = c.take(second, OpKind::kAdd);
  if (!sub || !add) return std::nullopt;
  const std::optional<Term> ac = product(g, c, sub->in[0]), bs = product(g, c, sub->in[1]);
  const std::optional<Term> s0 = product(g, c, add->in[0]), s1 = product(g, c, add->in[1]);
  if (!ac || !bs || !s0 || !s1) return std::nullopt;
  if (ac->table_op != OpKind::kCos || bs->table_op != OpKind::kSin) return std::nullopt;
  const Term& as = s0->table_op == OpKind::kSin ? *s0 : *s1;
  const Term& bc = s0->table_op == OpKind::kSin ? *s1 : *s0;
  if (as.table_op != OpKind::kSin || bc.table_op != OpKind::kCos) return std::nullopt;
  const Rotation r{ac->data, bs->data, ac->table, bs->table};
  if (as.data != r.a || as.table != r.sin || bc.data != r.b || bc.table != r.cos) return std::nullopt;
  // Both tables turn the same angles: rope_tables' cos(angles) and sin(angles).
  if (producer(g, r.cos)->in[0] != producer(g, r.sin)->in[0]) return std::nullopt;
  return r;
}

// The slice of x's last axis [start, limit) that v is; returns x.
std::optional<ValueId> last_axis_slice(const ir::Graph& g, Chain& c, ValueId v, int64_t start, int64_t limit) {
  const Eqn* s = c.take(v, OpKind::kSlice);
  if (!s || !slices_last_axis(g, *s, start, limit)) return std::nullopt;
  return s->in[0];
}

Match rope_match(size_t root, const Chain& c, ir::RopeLayout layout, int64_t rot, ValueId x, const Rotation& r) {
  Match m;
  m.root = root;
  m.body = c.body();
  m.op = OpKind::kRope;
  m.operands = {x, r.cos, r.sin};
  m.params.rope = {layout, rot};
  return m;
}

// concat(first, second [, tail]) over the last axis: the half layout.
std::optional<Match> match_half(const ir::Graph& g, size_t i) {
  const Eqn& e = g.eqns[i];
  if (e.in.size() != 2 && e.in.size() != 3) return std::nullopt;
  Chain c(g);
  std::optional<Rotation> r = rotation(g, c, e.in[0], e.in[1]);
  if (!r || g.type(r->a).shape.empty()) return std::nullopt;
  const int64_t half = g.type(r->a).shape.back(), rot = 2 * half;
  const std::optional<ValueId> x = last_axis_slice(g, c, r->a, 0, half);
  if (!x || last_axis_slice(g, c, r->b, half, rot) != x) return std::nullopt;
  const int64_t dim = g.type(*x).shape.back();
  if (e.in.size() == 3 ? last_axis_slice(g, c, e.in[2], rot, dim) != x : rot != dim) return std::nullopt;
  return rope_match(i, c, ir::RopeLayout::kHalf, rot, *x, *r);
}

// The interleaved rotation: its terms, the value xs its pairs come from, and the shape
// [..., T, rot] the rope turns (xs's own shape unless a folded reshape sits between).
struct Pairs {
  Rotation r;
  ValueId xs = -1;
  Shape head;
};

// concat(e·cos − o·sin, e·sin + o·cos) over a new last axis of 2, where e|o are the halves
// of the pairs reshape(xs, [..., h, 2]).
std::optional<Pairs> interleaved_rotation(const ir::Graph& g, Chain& c, ValueId rotated) {
  const Eqn* cat = c.take(rotated, OpKind::kConcat);
  const int64_t rank = static_cast<int64_t>(g.type(rotated).shape.size());
  if (!cat || cat->in.size() != 2 || cat->params.axis != rank - 1) return std::nullopt;
  std::optional<Rotation> r = rotation(g, c, cat->in[0], cat->in[1]);
  if (!r) return std::nullopt;
  const std::optional<ValueId> xr = last_axis_slice(g, c, r->a, 0, 1);
  if (!xr || last_axis_slice(g, c, r->b, 1, 2) != xr) return std::nullopt;
  const Eqn* pairs = c.take(*xr, OpKind::kReshape);
  const Shape& split = g.type(*xr).shape;  // [..., T, h, 2]
  if (!pairs || split.size() < 3 || split.back() != 2) return std::nullopt;
  Shape head(split.begin(), split.end() - 1);
  head.back() *= 2;
  return Pairs{*r, pairs->in[0], head};
}

// reshape(rotated, [..., T, rot]): the whole interleaved chain.
std::optional<Pairs> interleaved_pairs(const ir::Graph& g, Chain& c, ValueId flat) {
  const Eqn* back = c.take(flat, OpKind::kReshape);
  std::optional<Pairs> found = back ? interleaved_rotation(g, c, back->in[0]) : std::nullopt;
  if (!found || g.type(flat).shape != found->head) return std::nullopt;
  return found;
}

// A rope of the pairs' source, read through a reshape to the head shape when a fold moved
// the tracer's reshape into the pairs reshape (deepseek2's k_rot).
Match pairs_match(size_t root, const Chain& c, const Pairs& p) {
  Match m = rope_match(root, c, ir::RopeLayout::kInterleaved, p.head.back(), p.xs, p.r);
  std::erase(m.body, root);  // a walk that started at the root took it
  return m;
}

// The interleaved layout, one candidate per reading of the root:
// - reshape root: the whole head, reshape(rotated, [..., T, rot]);
// - concat root: concat(reshape(rotated), x[..., rot:]) for a partial rotary prefix;
// - concat root: rotated itself, when canonicalize folded the reshape back into its
//   readers (repeat_kv's reshape of k): the rope is followed by a reshape to [..., h, 2].
void match_interleaved(const ir::Graph& g, size_t i, std::vector<Match>& out) {
  const Eqn& e = g.eqns[i];
  const auto head_of = [&](ValueId v) { return g.type(v).shape; };
  if (e.op == OpKind::kReshape) {
    Chain c(g);
    if (std::optional<Pairs> p = interleaved_pairs(g, c, e.out)) {
      Match m = pairs_match(i, c, *p);
      if (head_of(p->xs) != p->head) m.reshape_first = p->head;
      out.push_back(std::move(m));
    }
    return;
  }
  if (e.op != OpKind::kConcat) return;
  if (e.in.size() == 2) {
    Chain c(g);
    std::optional<Pairs> p = interleaved_pairs(g, c, e.in[0]);
    const int64_t rot = p ? p->head.back() : 0;
    // x[..., :rot] of x, pairs read straight from it.
    const std::optional<ValueId> x = p && head_of(p->xs) == p->head ? last_axis_slice(g, c, p->xs, 0, rot) : std::nullopt;
    if (x && last_axis_slice(g, c, e.in[1], rot, g.type(*x).shape.back()) == x) {
      out.push_back(rope_match(i, c, ir::RopeLayout::kInterleaved, rot, *x, p->r));
    }
  }
  Chain c(g);
  if (std::optional<Pairs> p = interleaved_rotation(g, c, e.out)) {
    Match m = pairs_match(i, c, *p);
    if (head_of(p->xs) != p->head) m.reshape_first = p->head;
    m.reshape_to_root = true;
    out.push_back(std::move(m));
  }
}

std::vector<Match> find_ropes(const ir::Graph& g) {
  std::vector<Match> found;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const Eqn& e = g.eqns[i];
    const int64_t rank = static_cast<int64_t>(g.type(e.out).shape.size());
    if (e.op == OpKind::kConcat && e.params.axis == rank - 1) {
      if (std::optional<Match> m = match_half(g, i)) found.push_back(std::move(*m));
    }
    match_interleaved(g, i, found);
  }
  return found;
}

// perm swaps the last-but-one axis with the one before it, and moves nothing else.
bool swaps_tokens_and_heads(const std::vector<int64_t>& perm) {
  const auto rank = static_cast<int64_t>(perm.size());
  if (rank < 3) return false;
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t want = a == rank - 3 ? rank - 2 : a == rank - 2 ? rank - 3 : a;
    if (perm[static_cast<size_t>(a)] != want) return false;
  }
  return true;
}

// A rope of transpose(y) that puts y's tokens behind its heads ([..., T, H, D] read as [...,
// H, T, D]: a linear's output split into heads) reads y in place instead (token axis -3),
// and the transpose moves behind it. Where the readers lay the heads out again as y has
// them (a paged step's rows, [rows, H, 1, D]), canonicalize then folds both transposes
// into a reshape: no copy is left. Each element is the same product either way (exact).
// Swaps of a size-1 axis are left alone: they move nothing, and the attention pass reads
// that spelling.
Result<ir::Graph> rope_reads_heads_in_place(const ir::Graph& g, bool& moved) {
  moved = false;
  return rewrite_each(g, [&](Rewriter& rw, size_t i) {
    const Eqn& e = g.eqns[i];
    if (e.op != OpKind::kRope || e.params.rope.token_axis != -2) return false;
    const Eqn* t = producer(g, e.in[0]);
    if (t == nullptr || t->op != OpKind::kTranspose || !swaps_tokens_and_heads(t->params.axes)) return false;
    const Shape& x = g.type(e.in[0]).shape;
    if (x[x.size() - 2] == 1 || x[x.size() - 3] == 1) return false;
    ir::Params p = e.params;
    p.rope.token_axis = -3;
    const ir::V z = rw.emit(OpKind::kRope, {rw.get(t->in[0]), rw.get(e.in[1]), rw.get(e.in[2])}, p);
    rw.replace(e.out, rw.builder().transpose(z, t->params.axes));
    moved = true;
    return true;
  });
}

Result<ir::Graph> rope(const ir::Graph& g) {
  const std::vector<Match> chosen = select_matches(g, find_ropes(g));
  Result<ir::Graph> out = apply_selected(g, chosen);
  if (!out) return out;
  bool moved = false;
  out = rope_reads_heads_in_place(*out, moved);
  // A rope followed by its reshape to [..., h, 2] and then by its readers' reshapes, or a
  // transpose moved behind a rope: fold the relayouts again, as canonicalize left them (it
  // is exact too).
  const bool reshaped = std::any_of(chosen.begin(), chosen.end(), [](const Match& m) { return m.reshape_to_root; });
  if (!out || !(reshaped || moved)) return out;
  return canonicalize_pass().run(*out);
}

}  // namespace

Pass rope_pass() { return {"rope", Exactness::kExact, rope}; }

}  // namespace kvf::compile
