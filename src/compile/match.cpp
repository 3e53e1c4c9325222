// Pattern-matching helpers of the passes and the match applier.
#include "compile/match.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "ir/infer.h"

namespace kvf::compile {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

namespace {

void put(std::ostream& os, const std::vector<int64_t>& xs) {
  os << '(';
  for (int64_t x : xs) os << x << ',';
  os << ')';
}

uint64_t bits(double x) { return std::bit_cast<uint64_t>(x); }

}  // namespace

ValueId reshape_source(const ir::Graph& g, ValueId v) {
  while (const Eqn* e = def(g, v, OpKind::kReshape)) v = e->in[0];
  return v;
}

std::string params_key(const ir::Params& p) {
  std::ostringstream os;
  put(os, p.axes);
  put(os, p.shape);
  put(os, p.starts);
  put(os, p.limits);
  put(os, p.steps);
  os << p.axis << '|' << p.keepdim << '|' << static_cast<int>(p.cmp) << '|' << static_cast<int>(p.dtype) << '|'
     << bits(p.attn.scale) << ',' << bits(p.attn.softcap) << ',' << p.attn.n_rep << ',' << p.attn.has_shared << ','
     << p.attn.has_mask << ',' << p.attn.has_len << ',' << p.attn.has_read << '|' << static_cast<int>(p.rope.layout)
     << ',' << p.rope.rotary_dim << '|' << bits(p.eps) << ',' << p.unit_offset << ',' << static_cast<int>(p.glu) << ','
     << p.has_bias << '|' << p.topk << ',' << p.ratio << ',' << bits(p.scale);
  return os.str();
}

Uses::Uses(const ir::Graph& g) : readers_(g.values.size()), root_(g.values.size(), false) {
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    for (ValueId v : g.eqns[i].in) readers_[static_cast<size_t>(v)].push_back(i);
  }
  for (const ir::Output& o : g.outputs) root_[static_cast<size_t>(o.value)] = true;
  for (const ir::Donation& d : g.donations) root_[static_cast<size_t>(d.state_out)] = true;
  for (const ir::Validation& c : g.validations) root_[static_cast<size_t>(c.witness)] = true;
}

const Eqn* producer(const ir::Graph& g, ValueId v) {
  const ir::Value& val = g.value(v);
  if (val.kind != ir::ValueKind::kIntermediate || val.producer < 0) return nullptr;
  return &g.eqns[static_cast<size_t>(val.producer)];
}

const Eqn* def(const ir::Graph& g, ValueId v, OpKind op) {
  const Eqn* e = producer(g, v);
  return e && e->op == op ? e : nullptr;
}

bool is_literal(const ir::Graph& g, ValueId v, double x) {
  const ir::Value& val = g.value(v);
  return val.kind == ir::ValueKind::kLiteral && val.literal == x;
}

bool is_literal_near(const ir::Graph& g, ValueId v, double x, double rel_tol) {
  const ir::Value& val = g.value(v);
  return val.kind == ir::ValueKind::kLiteral && std::fabs(val.literal - x) <= rel_tol * std::fabs(x);
}

bool reduces_last_axis_keepdim(const ir::Graph& g, const Eqn& e) {
  const auto rank = static_cast<int64_t>(g.type(e.in[0]).shape.size());
  return e.in.size() == 1 && e.params.keepdim && e.params.axes == std::vector<int64_t>{rank - 1};
}

bool slices_last_axis(const ir::Graph& g, const Eqn& e, int64_t start, int64_t limit) {
  if (e.op != OpKind::kSlice) return false;
  const Shape& s = g.type(e.in[0]).shape;
  const ir::Params& p = e.params;
  if (s.empty() || p.starts.size() != s.size() || p.limits.size() != s.size()) return false;
  const size_t last = s.size() - 1;
  for (size_t a = 0; a < s.size(); ++a) {
    const int64_t step = p.steps.empty() ? 1 : p.steps[a];
    const int64_t lo = a == last ? start : 0, hi = a == last ? limit : s[a];
    if (step != 1 || p.starts[a] != lo || p.limits[a] != hi) return false;
  }
  return true;
}

const Eqn* Chain::take(ValueId v, OpKind op) {
  const Eqn* e = def(*g_, v, op);
  if (e) body_.push_back(static_cast<size_t>(g_->value(v).producer));
  return e;
}

namespace {

// Nothing outside the chain reads what its body defines.
bool closed(const ir::Graph& g, const Uses& uses, const Match& m) {
  for (size_t b : m.body) {
    const ValueId v = g.eqns[b].out;
    if (uses.is_root(v)) return false;
    for (size_t r : uses.readers(v)) {
      if (r != m.root && std::find(m.body.begin(), m.body.end(), r) == m.body.end()) return false;
    }
  }
  return true;
}

bool same_count(const Shape& a, const Shape& b) {
  Result<int64_t> na = checked_numel(a), nb = checked_numel(b);
  const bool counted = na.ok() && nb.ok();  // look at both: neither may die unchecked
  return counted && *na == *nb;
}

// The fused eqn types as what it replaces, so every reader sees the same value type.
bool well_typed(const ir::Graph& g, const Match& m) {
  std::vector<ir::TensorType> in;
  for (ValueId v : m.operands) in.push_back(g.type(v));
  if (m.reshape_first) {
    if (in.empty() || !same_count(in[0].shape, *m.reshape_first)) return false;
    in[0].shape = *m.reshape_first;
  }
  Result<ir::TensorType> t = ir::infer(m.op, m.params, in);
  if (!t.ok()) return false;
  const ir::TensorType& want = g.type(g.eqns[m.root].out);
  if (!m.reshape_to_root) return *t == want;
  return t->dtype == want.dtype && same_count(t->shape, want.shape);
}

}  // namespace

std::vector<Match> select_matches(const ir::Graph& g, std::vector<Match> candidates) {
  for (Match& m : candidates) {
    std::sort(m.body.begin(), m.body.end());
    m.body.erase(std::unique(m.body.begin(), m.body.end()), m.body.end());
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Match& a, const Match& b) { return a.body.size() > b.body.size(); });
  const Uses uses(g);
  std::vector<bool> claimed(g.eqns.size(), false);
  std::vector<Match> selected;
  for (Match& m : candidates) {
    bool free = !claimed[m.root] && !ir::is_collective(g.eqns[m.root].op);
    for (size_t b : m.body) free = free && !claimed[b] && !ir::is_collective(g.eqns[b].op);  // kept, in order
    if (!free || !closed(g, uses, m) || !well_typed(g, m)) continue;
    claimed[m.root] = true;
    for (size_t b : m.body) claimed[b] = true;
    selected.push_back(std::move(m));
  }
  return selected;
}

Result<ir::Graph> apply_selected(const ir::Graph& g, const std::vector<Match>& selected) {
  std::vector<const Match*> at_root(g.eqns.size(), nullptr);
  std::vector<bool> dropped(g.eqns.size(), false);
  for (const Match& m : selected) {
    at_root[m.root] = &m;
    for (size_t b : m.body) dropped[b] = true;
  }
  return rewrite_each(g, [&](Rewriter& rw, size_t i) {
    if (dropped[i]) return true;
    const Match* m = at_root[i];
    if (!m) return false;
    std::vector<ir::V> in;
    for (ValueId v : m->operands) in.push_back(rw.get(v));
    if (m->reshape_first) {
      ir::Params p;
      p.shape = *m->reshape_first;
      in[0] = rw.emit(OpKind::kReshape, {in[0]}, p);
    }
    ir::V out = rw.emit(m->op, std::move(in), m->params);
    if (m->reshape_to_root) {
      ir::Params p;
      p.shape = g.type(g.eqns[i].out).shape;
      out = rw.emit(OpKind::kReshape, {out}, p);
    }
    const std::string& name = g.value(g.eqns[i].out).name;
    if (!name.empty() && out.valid()) rw.builder().name(out, name);
    rw.replace(g.eqns[i].out, out);
    return true;
  });
}

}  // namespace kvf::compile
