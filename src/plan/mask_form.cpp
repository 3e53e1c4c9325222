#include "plan/mask_form.h"

#include <cmath>

namespace kvf::plan {
namespace {

const ir::Eqn* producer(const ir::Graph& g, ir::ValueId v, ir::OpKind op) {
  const int e = g.value(v).producer;
  if (g.value(v).kind != ir::ValueKind::kIntermediate || e < 0) return nullptr;
  const ir::Eqn& eqn = g.eqns[static_cast<size_t>(e)];
  return eqn.op == op ? &eqn : nullptr;
}

bool is_literal(const ir::Graph& g, ir::ValueId v, double x) {
  const ir::Value& l = g.value(v);
  return l.kind == ir::ValueKind::kLiteral && l.literal == x;
}

}  // namespace

ir::ValueId causal_positions(const ir::Graph& g, ir::ValueId mask) {
  const Shape& m = g.type(mask).shape;
  if (m.size() != 4 || m[0] != 1 || m[1] != 1) return -1;
  const int64_t lq = m[2], lk = m[3];
  const ir::Eqn* r = producer(g, mask, ir::OpKind::kReshape);
  const ir::Eqn* sel = r ? producer(g, r->in[0], ir::OpKind::kSelect) : nullptr;
  if (!sel || g.type(sel->out).shape != Shape{lq, lk}) return -1;
  if (!is_literal(g, sel->in[1], 0.0) || !is_literal(g, sel->in[2], -INFINITY)) return -1;
  const ir::Eqn* cmp = producer(g, sel->in[0], ir::OpKind::kCompare);
  if (!cmp || cmp->params.cmp != ir::CmpDir::kLe) return -1;
  const ir::Eqn* iota = producer(g, cmp->in[0], ir::OpKind::kIota);
  if (!iota || iota->params.axis != 1 || g.type(iota->out) != ir::TensorType{DType::kI32, {1, lk}}) return -1;
  const ir::Eqn* column = producer(g, cmp->in[1], ir::OpKind::kReshape);
  if (!column || g.type(column->out).shape != Shape{lq, 1}) return -1;
  const ir::TensorType& pos = g.type(column->in[0]);
  if (pos.dtype != DType::kI32 || numel(pos.shape) != lq) return -1;
  return column->in[0];
}

}  // namespace kvf::plan
