// moe (exact): the routed experts' sum that models/moe.cpp traces, after fusion has formed
// its Linear and Glu eqns,
//   t_e = linear(glu(linear(x, gate_e), linear(x, up_e)), down_e) * broadcast(slice(w, e))
//   out = ((t_0 + t_1) + t_2) + ... + t_{E-1}
// becomes one Moe eqn over x, w and the 3E weights, which an executor runs for the experts
// each row picked (weight not 0) alone. Each picked term is computed as the chain computes
// it; an unpicked one adds an exact 0 there and nothing here (they differ only where an
// unpicked expert's unit is not finite). Anything else keeps its eqns.
#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

// What one term t_e reads: the unit's input x, the routing weights w and its three weights.
struct Term {
  ValueId x = -1, w = -1, gate = -1, up = -1, down = -1;
  ir::GluAct act = ir::GluAct::kSilu;
};

// A Linear without bias over a stored weight: x and the weight.
std::optional<std::pair<ValueId, ValueId>> plain_linear(Chain& c, ValueId v) {
  const Eqn* l = c.take(v, OpKind::kLinear);
  if (!l || l->params.has_bias) return std::nullopt;
  return std::make_pair(l->in[0], l->in[1]);
}

// t_e = expert e's unit times broadcast(slice(w, last axis, e..e+1)).
std::optional<Term> term(const ir::Graph& g, Chain& c, ValueId v, int64_t e) {
  const Eqn* mul = c.take(v, OpKind::kMul);
  if (!mul) return std::nullopt;
  std::optional<Term> found;
  either_order(*mul, [&](ValueId unit, ValueId scale) {
    Chain t = c;
    const Eqn* b = t.take(scale, OpKind::kBroadcast);
    const Eqn* s = b ? t.take(b->in[0], OpKind::kSlice) : nullptr;
    if (!s || !slices_last_axis(g, *s, e, e + 1) || g.type(scale) != g.type(unit)) return false;
    const std::optional<std::pair<ValueId, ValueId>> down = plain_linear(t, unit);
    const Eqn* glu = down ? t.take(down->first, OpKind::kGlu) : nullptr;
    if (!glu) return false;
    const std::optional<std::pair<ValueId, ValueId>> gate = plain_linear(t, glu->in[0]);
    const std::optional<std::pair<ValueId, ValueId>> up = gate ? plain_linear(t, glu->in[1]) : std::nullopt;
    if (!up || gate->first != up->first) return false;
    c = t;
    found = Term{gate->first, s->in[0], gate->second, up->second, down->second, glu->params.glu};
    return true;
  });
  return found;
}

// The terms of the left-leaning sum at v, first term first; empty unless it is exactly the
// E terms of one routing weight w [..., E] over one x.
std::vector<Term> terms(const ir::Graph& g, Chain& c, ValueId v) {
  std::vector<ValueId> summands;
  for (bool root = true; const Eqn* add = def(g, v, OpKind::kAdd); root = false) {
    if (def(g, add->in[1], OpKind::kMul) == nullptr) break;
    if (!root) c.take(v, OpKind::kAdd);  // the root is the match's, not its body's
    summands.push_back(add->in[1]);
    v = add->in[0];
  }
  summands.push_back(v);
  std::vector<Term> out;
  const auto e = static_cast<int64_t>(summands.size());
  for (int64_t i = 0; i < e; ++i) {
    std::optional<Term> t = term(g, c, summands[static_cast<size_t>(e - 1 - i)], i);
    if (!t) return {};
    const Term& first = out.empty() ? *t : out.front();
    if (t->x != first.x || t->w != first.w || t->act != first.act) return {};
    out.push_back(*t);
  }
  if (e < 2 || g.type(out.front().w).shape.back() != e) return {};
  return out;
}

Result<ir::Graph> moe(const ir::Graph& g) {
  std::vector<Match> found;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op != OpKind::kAdd) continue;
    Chain c(g);
    const std::vector<Term> ts = terms(g, c, g.eqns[i].out);
    if (ts.empty()) continue;
    Match m;
    m.root = i;
    m.body = c.body();
    m.op = OpKind::kMoe;
    m.operands = {ts.front().x, ts.front().w};
    for (const Term& t : ts) m.operands.push_back(t.gate);
    for (const Term& t : ts) m.operands.push_back(t.up);
    for (const Term& t : ts) m.operands.push_back(t.down);
    m.params.glu = ts.front().act;
    found.push_back(std::move(m));
  }
  Result<ir::Graph> fused = apply_matches(g, std::move(found));
  if (!fused) return fused;
  return dce_pass().run(*fused);
}

}  // namespace

Pass moe_pass() { return {"moe", Exactness::kExact, moe}; }

}  // namespace kvf::compile
