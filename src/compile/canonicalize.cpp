// canonicalize (exact): drops eqns that return their operand unchanged, folds chains of
// reshapes into one, and turns a transpose that puts every element back where it was
// (undoing a transpose before it) into a reshape of the chain's source, so later passes
// match one spelling of each chain and executors copy nothing there. It never reorders
// arithmetic; every rule below keeps every bit of every value (docs/compiler.md).
#include <cmath>
#include <optional>

#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool is_full_slice(const ir::Params& p, const Shape& s) {
  for (size_t a = 0; a < s.size(); ++a) {
    const int64_t step = p.steps.empty() ? 1 : p.steps[a];
    if (p.starts[a] != 0 || p.limits[a] != s[a] || step != 1) return false;
  }
  return true;
}

// Whether adding literal v to any x gives x bit for bit. Integers: 0. Floats: only -0,
// since -0 + +0 is +0 and the sign of zero is a bit of the output (it decides 1/x).
bool adds_nothing(const ir::Value& v) {
  if (v.kind != ir::ValueKind::kLiteral || v.literal != 0) return false;
  return is_integer(v.type.dtype) || std::signbit(v.literal);
}

// x - v == x bit for bit: v = +0 (x - +0 keeps -0 as -0), or any integer 0.
bool subtracts_nothing(const ir::Value& v) {
  if (v.kind != ir::ValueKind::kLiteral || v.literal != 0) return false;
  return is_integer(v.type.dtype) || !std::signbit(v.literal);
}

// For a binary eqn whose other operand is a neutral literal: that operand x, as long as
// the result has x's type (a literal that broadcasts x to a new shape is not neutral).
std::optional<ValueId> neutral_binary(const ir::Graph& g, const Eqn& e) {
  const ir::TensorType& out = g.type(e.out);
  auto keeps = [&](ValueId x) { return g.type(x) == out ? std::optional<ValueId>(x) : std::nullopt; };
  const ir::Value& a = g.value(e.in[0]);
  const ir::Value& b = g.value(e.in[1]);
  switch (e.op) {
    case OpKind::kMul:
      if (is_literal(g, e.in[1], 1.0)) return keeps(e.in[0]);
      if (is_literal(g, e.in[0], 1.0)) return keeps(e.in[1]);
      return std::nullopt;
    case OpKind::kDiv: return is_literal(g, e.in[1], 1.0) ? keeps(e.in[0]) : std::nullopt;
    case OpKind::kAdd:
      if (adds_nothing(b)) return keeps(e.in[0]);
      if (adds_nothing(a)) return keeps(e.in[1]);
      return std::nullopt;
    case OpKind::kSub: return subtracts_nothing(b) ? keeps(e.in[0]) : std::nullopt;
    default: return std::nullopt;
  }
}

// The operand e returns unchanged, if it does.
std::optional<ValueId> identity_operand(const ir::Graph& g, const Eqn& e) {
  if (e.in.empty()) return std::nullopt;
  const ir::TensorType& x = g.type(e.in[0]);
  const ir::Params& p = e.params;
  bool same = false;
  switch (e.op) {
    case OpKind::kReshape: same = p.shape == x.shape; break;
    case OpKind::kBroadcast: same = p.shape == x.shape; break;
    case OpKind::kTranspose: same = is_identity_perm(p.axes); break;
    case OpKind::kCast: same = p.dtype == x.dtype; break;
    case OpKind::kSlice: same = is_full_slice(p, x.shape); break;
    case OpKind::kMul: case OpKind::kDiv: case OpKind::kAdd: case OpKind::kSub: return neutral_binary(g, e);
    default: break;
  }
  return same ? std::optional<ValueId>(e.in[0]) : std::nullopt;
}

// A layout of a source's elements: each axis's extent and stride (in elements).
struct View {
  Shape shape;
  std::vector<int64_t> strides;
};

View row_major(const Shape& shape) {
  View v{shape, std::vector<int64_t>(shape.size(), 1)};
  for (size_t a = shape.size(); a-- > 1;) v.strides[a - 1] = v.strides[a] * shape[a];
  return v;
}

View transposed(const View& v, const std::vector<int64_t>& perm) {
  View t;
  for (int64_t a : perm) {
    t.shape.push_back(v.shape[static_cast<size_t>(a)]);
    t.strides.push_back(v.strides[static_cast<size_t>(a)]);
  }
  return t;
}

// v's elements read in `to`'s row-major order without a copy, when they can be: the axes
// fall into runs that are contiguous with each other (stride[a] = stride[a+1] * extent[a+1]),
// and each new axis group covers exactly one run. Size-1 axes go anywhere.
std::optional<View> reshaped(const View& v, const Shape& to) {
  View from;
  for (size_t a = 0; a < v.shape.size(); ++a) {
    if (v.shape[a] == 0) return std::nullopt;
    if (v.shape[a] != 1) {
      from.shape.push_back(v.shape[a]);
      from.strides.push_back(v.strides[a]);
    }
  }
  View out{to, std::vector<int64_t>(to.size(), 0)};
  size_t next = to.size();  // new axes are given strides from the innermost out
  for (size_t end = from.shape.size(); end > 0;) {
    size_t begin = end - 1;  // the run [begin, end): contiguous among themselves
    int64_t run = from.shape[begin];
    while (begin > 0 && from.strides[begin - 1] == from.strides[begin] * from.shape[begin]) {
      --begin;
      run *= from.shape[begin];
    }
    int64_t covered = 1;
    const int64_t unit = from.strides[end - 1];
    while (next > 0 && (covered < run || to[next - 1] == 1)) {
      --next;
      out.strides[next] = unit * covered;
      covered *= to[next];
    }
    if (covered != run) return std::nullopt;
    end = begin;
  }
  while (next > 0) {
    if (to[--next] != 1) return std::nullopt;
  }
  return out;
}

bool is_row_major(const View& v) {
  int64_t expect = 1;
  for (size_t a = v.shape.size(); a-- > 0;) {
    if (v.shape[a] == 1) continue;
    if (v.strides[a] != expect) return false;
    expect *= v.shape[a];
  }
  return true;
}

// For a transpose whose value is its chain's source in row-major order (the chain: the
// reshapes and transposes it reads through, one transpose at least), that source. A lone
// transpose of size-1 axes is left as it is: the attention pass matches that spelling.
std::optional<ValueId> order_preserving_source(const ir::Graph& g, const Eqn& e) {
  if (e.op != OpKind::kTranspose) return std::nullopt;
  std::vector<const Eqn*> chain{&e};
  ValueId src = e.in[0];
  bool undoes = false;  // another transpose in the chain
  for (const Eqn* d = producer(g, src); d != nullptr && (d->op == OpKind::kReshape || d->op == OpKind::kTranspose);
       d = producer(g, src)) {
    chain.push_back(d);
    undoes = undoes || d->op == OpKind::kTranspose;
    src = d->in[0];
  }
  if (!undoes) return std::nullopt;
  View v = row_major(g.type(src).shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if ((*it)->op == OpKind::kTranspose) {
      v = transposed(v, (*it)->params.axes);
    } else if (std::optional<View> r = reshaped(v, (*it)->params.shape)) {
      v = *r;
    } else {
      return std::nullopt;
    }
  }
  return is_row_major(v) ? std::optional<ValueId>(src) : std::nullopt;
}

// A reshape that only reshapes read: after folding, they read its source, so it goes.
bool folded_away(const Uses& uses, const Eqn& e, const ir::Graph& g) {
  if (e.op != OpKind::kReshape || uses.is_root(e.out) || uses.readers(e.out).empty()) return false;
  for (size_t r : uses.readers(e.out)) {
    if (g.eqns[r].op != OpKind::kReshape) return false;
  }
  return true;
}

// Uses of `old` read `now`; a stable name moves along when `now` has none.
void forward(Rewriter& rw, ValueId old, ir::V now) {
  const std::string& name = rw.src().value(old).name;
  if (!name.empty()) rw.builder().name(now, name);
  rw.replace(old, now);
}

bool canonicalize_eqn(Rewriter& rw, const Uses& uses, size_t i) {
  const ir::Graph& g = rw.src();
  const Eqn& e = g.eqns[i];
  if (folded_away(uses, e, g)) return true;
  if (e.op == OpKind::kReshape) {
    const ValueId src = reshape_source(g, e.in[0]);
    if (g.type(src).shape == e.params.shape) {
      forward(rw, e.out, rw.get(src));
    } else {
      ir::Params p;
      p.shape = e.params.shape;
      forward(rw, e.out, rw.emit(OpKind::kReshape, {rw.get(src)}, p));
    }
    return true;
  }
  if (const std::optional<ValueId> src = order_preserving_source(g, e)) {
    if (g.type(*src).shape == g.type(e.out).shape) {
      forward(rw, e.out, rw.get(*src));
    } else {
      ir::Params p;
      p.shape = g.type(e.out).shape;
      forward(rw, e.out, rw.emit(OpKind::kReshape, {rw.get(*src)}, p));
    }
    return true;
  }
  const std::optional<ValueId> same = identity_operand(g, e);
  if (!same) return false;
  forward(rw, e.out, rw.get(*same));
  return true;
}

Result<ir::Graph> canonicalize(const ir::Graph& g) {
  const Uses uses(g);
  return rewrite_each(g, [&](Rewriter& rw, size_t i) { return canonicalize_eqn(rw, uses, i); });
}

}  // namespace

Pass canonicalize_pass() { return {"canonicalize", Exactness::kExact, canonicalize}; }

}  // namespace kvf::compile
