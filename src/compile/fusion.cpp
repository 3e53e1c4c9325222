// fusion (reassociating): the row and pointwise chains of ops:: become one fused eqn each:
// rmsnorm -> RmsNorm, softmax over the last axis -> Softmax, silu/gelu(gate) * up -> Glu,
// matmul(x, transpose(W)) [+ bias] over a stored weight -> Linear. A fused eqn rounds once
// where its chain rounded at every step, so results move within float tolerance. Only a
// chain nothing else reads is fused; anything that does not match exactly keeps its eqns.
#include <cmath>
#include <optional>

#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

// Irrational constants may be written to fewer digits than a double holds.
constexpr double kConstTol = 1e-7;

Match fused(size_t root, const Chain& c, OpKind op, std::vector<ValueId> operands, ir::Params params = {}) {
  Match m;
  m.root = root;
  m.body = c.body();
  m.op = op;
  m.operands = std::move(operands);
  m.params = std::move(params);
  return m;
}

// ---- rmsnorm: x * rsqrt(sum(x * x, last, keepdim) / D + eps) * (w | w + 1)

// x * rsqrt(mean(x²) + eps): returns x and eps.
std::optional<std::pair<ValueId, double>> normalized(const ir::Graph& g, Chain& c, ValueId v) {
  const Eqn* n = c.take(v, OpKind::kMul);
  if (!n) return std::nullopt;
  std::optional<std::pair<ValueId, double>> found;
  either_order(*n, [&](ValueId x, ValueId r) {
    Chain t = c;
    const Eqn* rs = t.take(r, OpKind::kRsqrt);
    const Eqn* a = rs ? t.take(rs->in[0], OpKind::kAdd) : nullptr;
    if (!a) return false;
    if (g.type(x).shape.empty()) return false;
    const auto dim = static_cast<double>(g.type(x).shape.back());
    return either_order(*a, [&](ValueId ms, ValueId eps) {
      Chain u = t;
      const Eqn* mean = u.take(ms, OpKind::kDiv);
      if (!mean || !is_literal(g, mean->in[1], dim) || g.value(eps).kind != ir::ValueKind::kLiteral) return false;
      const Eqn* sum = u.take(mean->in[0], OpKind::kReduceSum);
      if (!sum || !reduces_last_axis_keepdim(g, *sum)) return false;
      const Eqn* sq = u.take(sum->in[0], OpKind::kMul);
      if (!sq || sq->in[0] != x || sq->in[1] != x) return false;
      c = u;
      found = std::make_pair(x, g.value(eps).literal);
      return true;
    });
  });
  return found;
}

// Both readings of the weight: w + 1 as Gemma's unit offset (the larger chain), and the
// value itself as a plain weight, which still fuses when w + 1 has other readers.
void match_rmsnorm(const ir::Graph& g, size_t i, std::vector<Match>& out) {
  const Eqn& e = g.eqns[i];
  if (e.op != OpKind::kMul) return;
  either_order(e, [&](ValueId normed, ValueId w) {
    Chain c(g);
    const std::optional<std::pair<ValueId, double>> xe = normalized(g, c, normed);
    if (!xe) return false;
    ir::Params p;
    p.eps = xe->second;
    out.push_back(fused(i, c, OpKind::kRmsNorm, {xe->first, w}, p));
    Chain offset = c;
    const Eqn* plus = offset.take(w, OpKind::kAdd);
    if (plus) {
      either_order(*plus, [&](ValueId base, ValueId one) {
        if (!is_literal(g, one, 1.0)) return false;
        p.unit_offset = true;
        out.push_back(fused(i, offset, OpKind::kRmsNorm, {xe->first, base}, p));
        return true;
      });
    }
    return true;
  });
}

// ---- softmax: exp(x - max(x)) / sum(exp(x - max(x))), both over the last axis, keepdim

void match_softmax(const ir::Graph& g, size_t i, std::vector<Match>& out) {
  const Eqn& e = g.eqns[i];
  if (e.op != OpKind::kDiv) return;
  Chain c(g);
  const Eqn* ex = c.take(e.in[0], OpKind::kExp);
  const Eqn* sum = c.take(e.in[1], OpKind::kReduceSum);
  if (!ex || !sum || sum->in[0] != e.in[0] || !reduces_last_axis_keepdim(g, *sum)) return;
  const Eqn* sub = c.take(ex->in[0], OpKind::kSub);
  const Eqn* max = sub ? c.take(sub->in[1], OpKind::kReduceMax) : nullptr;
  if (!max || max->in[0] != sub->in[0] || !reduces_last_axis_keepdim(g, *max)) return;
  out.push_back(fused(i, c, OpKind::kSoftmax, {sub->in[0]}));
}

// ---- gated units: act(gate) * up

// 1 + f(v): the add and f's eqn, returning f's operand.
std::optional<ValueId> one_plus(const ir::Graph& g, Chain& c, ValueId v, OpKind f) {
  const Eqn* add = c.take(v, OpKind::kAdd);
  std::optional<ValueId> arg;
  if (!add) return arg;
  either_order(*add, [&](ValueId one, ValueId fx) {
    if (!is_literal(g, one, 1.0)) return false;
    const Eqn* fe = c.take(fx, f);
    if (fe) arg = fe->in[0];
    return fe != nullptr;
  });
  return arg;
}

// a * literal k (either order): returns a.
std::optional<ValueId> times(const ir::Graph& g, Chain& c, ValueId v, double k, double tol) {
  const Eqn* m = c.take(v, OpKind::kMul);
  std::optional<ValueId> a;
  if (!m) return a;
  either_order(*m, [&](ValueId x, ValueId lit) {
    if (!is_literal_near(g, lit, k, tol)) return false;
    a = x;
    return true;
  });
  return a;
}

// silu(gate) = gate / (1 + exp(-gate)).
std::optional<ValueId> silu_gate(const ir::Graph& g, Chain& c, ValueId v) {
  const Eqn* div = c.take(v, OpKind::kDiv);
  if (!div) return std::nullopt;
  const std::optional<ValueId> e = one_plus(g, c, div->in[1], OpKind::kExp);
  const Eqn* neg = e ? c.take(*e, OpKind::kNeg) : nullptr;
  if (!neg || neg->in[0] != div->in[0]) return std::nullopt;
  return div->in[0];
}

// (gate * 0.5) * (1 + t): returns gate and t's operand, t = tanh or erf.
std::optional<std::pair<ValueId, ValueId>> half_gate_times(const ir::Graph& g, Chain& c, ValueId v, OpKind t) {
  const Eqn* m = c.take(v, OpKind::kMul);
  std::optional<std::pair<ValueId, ValueId>> found;
  if (!m) return found;
  either_order(*m, [&](ValueId half_x, ValueId onep) {
    Chain u = c;
    const std::optional<ValueId> gate = times(g, u, half_x, 0.5, 0);
    const std::optional<ValueId> arg = gate ? one_plus(g, u, onep, t) : std::nullopt;
    if (!arg) return false;
    c = u;
    found = std::make_pair(*gate, *arg);
    return true;
  });
  return found;
}

// gelu_erf(gate) = gate * 0.5 * (1 + erf(gate * sqrt(1/2))).
std::optional<ValueId> gelu_erf_gate(const ir::Graph& g, Chain& c, ValueId v) {
  const auto found = half_gate_times(g, c, v, OpKind::kErf);
  if (!found || times(g, c, found->second, M_SQRT1_2, kConstTol) != found->first) return std::nullopt;
  return found->first;
}

// gelu_tanh(gate) = gate * 0.5 * (1 + tanh((gate + gate³ · 0.044715) · sqrt(2/π))).
std::optional<ValueId> gelu_tanh_gate(const ir::Graph& g, Chain& c, ValueId v) {
  const auto found = half_gate_times(g, c, v, OpKind::kTanh);
  if (!found) return std::nullopt;
  const ValueId gate = found->first;
  const std::optional<ValueId> inner = times(g, c, found->second, std::sqrt(2.0 / M_PI), kConstTol);
  const Eqn* sum = inner ? c.take(*inner, OpKind::kAdd) : nullptr;
  if (!sum) return std::nullopt;
  return either_order(*sum, [&](ValueId x, ValueId cubic) {
    Chain u = c;
    const std::optional<ValueId> cube = x == gate ? times(g, u, cubic, 0.044715, kConstTol) : std::nullopt;
    const Eqn* x3 = cube ? u.take(*cube, OpKind::kMul) : nullptr;  // (gate * gate) * gate
    if (!x3) return false;
    return either_order(*x3, [&](ValueId sq, ValueId x1) {
      Chain w = u;
      const Eqn* x2 = x1 == gate ? w.take(sq, OpKind::kMul) : nullptr;
      if (!x2 || x2->in[0] != gate || x2->in[1] != gate) return false;
      c = w;
      return true;
    });
  }) ? std::optional<ValueId>(gate) : std::nullopt;
}

void match_glu(const ir::Graph& g, size_t i, std::vector<Match>& out) {
  const Eqn& e = g.eqns[i];
  if (e.op != OpKind::kMul) return;
  either_order(e, [&](ValueId act, ValueId up) {
    using Reader = std::optional<ValueId> (*)(const ir::Graph&, Chain&, ValueId);
    const std::pair<ir::GluAct, Reader> acts[] = {
        {ir::GluAct::kSilu, silu_gate}, {ir::GluAct::kGeluTanh, gelu_tanh_gate}, {ir::GluAct::kGeluErf, gelu_erf_gate}};
    for (const auto& [kind, read] : acts) {
      Chain c(g);
      const std::optional<ValueId> gate = read(g, c, act);
      if (!gate) continue;
      ir::Params p;
      p.glu = kind;
      out.push_back(fused(i, c, OpKind::kGlu, {*gate, up}, p));
      return true;
    }
    return false;
  });
}

// ---- linear: matmul(x, transpose(W, {1, 0})) [+ bias]

// A weight as stored: a constant, or cast[f32] of one (f16, bf16 or block-quantized storage).
std::optional<ValueId> stored_constant(const ir::Graph& g, ValueId v) {
  if (const Eqn* cast = def(g, v, OpKind::kCast)) {
    if (cast->params.dtype != DType::kF32) return std::nullopt;
    v = cast->in[0];
  }
  if (g.value(v).kind != ir::ValueKind::kConstant) return std::nullopt;
  const DType dt = g.type(v).dtype;
  const bool storable = is_float(dt) || is_block_quant(dt);
  return storable ? std::optional<ValueId>(v) : std::nullopt;
}

// The Linear reads the stored constant and never the transpose or cast, so those are not
// part of its body: a view another reader needs stays, and dce drops the rest.
void match_linear(const ir::Graph& g, const Uses& uses, size_t i, std::vector<Match>& out) {
  const Eqn& e = g.eqns[i];
  if (e.op != OpKind::kMatMul) return;
  const ValueId x = e.in[0];
  const Eqn* t = def(g, e.in[1], OpKind::kTranspose);
  if (!t || t->params.axes != std::vector<int64_t>{1, 0} || g.type(x).dtype != DType::kF32) return;
  const std::optional<ValueId> w = stored_constant(g, t->in[0]);
  if (!w) return;
  Chain c(g);
  out.push_back(fused(i, c, OpKind::kLinear, {x, *w}));
  // A bias epilogue: the product's only reader adds an f32 [N] constant (or a cast of one).
  const std::vector<size_t>& readers = uses.readers(e.out);
  if (readers.size() != 1 || uses.is_root(e.out)) return;
  const size_t add = readers.front();
  if (g.eqns[add].op != OpKind::kAdd) return;
  either_order(g.eqns[add], [&](ValueId y, ValueId bias) {
    const ir::TensorType& bt = g.type(bias);
    if (y != e.out || bt.dtype != DType::kF32 || bt.shape != Shape{g.type(y).shape.back()} ||
        !stored_constant(g, bias)) {
      return false;
    }
    ir::Params p;
    p.has_bias = true;
    Chain with_bias(g);
    with_bias.take(y, OpKind::kMatMul);
    out.push_back(fused(add, with_bias, OpKind::kLinear, {x, *w, bias}, p));
    return true;
  });
}

Result<ir::Graph> fusion(const ir::Graph& g) {
  const Uses uses(g);
  std::vector<Match> found;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    match_rmsnorm(g, i, found);
    match_softmax(g, i, found);
    match_glu(g, i, found);
    match_linear(g, uses, i, found);
  }
  Result<ir::Graph> fused_graph = apply_matches(g, std::move(found));
  if (!fused_graph) return fused_graph;
  // The transposes and casts of fused weights that nothing reads any more.
  return dce_pass().run(*fused_graph);
}

}  // namespace

Pass fusion_pass() { return {"fusion", Exactness::kReassociating, fusion}; }

}  // namespace kvf::compile
