// Activation compositions: silu, gelu (erf and tanh forms), gated units, softcap, softmax
// and the masked softmax attention reads its scores with.
#include <cmath>
#include <limits>

#include "ir/ops.h"

namespace kvf::ir::ops {

V silu(V x) { return x / (1.0 + x.b->unary(OpKind::kExp, -x)); }
V sigmoid(V x) { return x.b->like(x, 1.0) / (1.0 + x.b->unary(OpKind::kExp, -x)); }

V relu(V x) { return x.b->binary(OpKind::kMax, x, x.b->like(x, 0.0)); }

// Sibling sub-expressions that both emit eqns are sequenced through locals: C++ leaves the
// order of operator operands unspecified, and the graph must not depend on the compiler.
V gelu_erf(V x) {
  V half_x = x * 0.5;
  V e = x.b->unary(OpKind::kErf, x * M_SQRT1_2);
  return half_x * (1.0 + e);
}

V gelu_tanh(V x) {
  const double k = std::sqrt(2.0 / M_PI);
  V inner = (x + (x * x * x) * 0.044715) * k;
  V half_x = x * 0.5;
  return half_x * (1.0 + x.b->unary(OpKind::kTanh, inner));
}

V swiglu(V gate, V up) { return silu(gate) * up; }

V geglu(V gate, V up, bool tanh_form) { return (tanh_form ? gelu_tanh(gate) : gelu_erf(gate)) * up; }

V softcap(V x, double cap) { return x.b->unary(OpKind::kTanh, x / cap) * cap; }

V softmax(V x) {
  Builder& b = *x.b;
  V m = b.reduce_max(x, {-1}, true);
  V ex = b.unary(OpKind::kExp, x - m);
  V s = b.reduce_sum(ex, {-1}, true);
  return ex / s;
}

// A row of -inf has max -inf: it subtracts 0 instead (every exp is 0) and divides by 1
// instead of its sum 0. A row with any finite entry has a max entry contributing exp(0) = 1,
// so its sum is at least 1 and neither select changes it; a NaN max compares false.
V masked_softmax(V x) {
  Builder& b = *x.b;
  V m = b.reduce_max(x, {-1}, true);
  V none = b.compare(m, b.like(m, -std::numeric_limits<double>::infinity()), CmpDir::kEq);
  V shift = b.select(none, b.like(m, 0.0), m);
  V ex = b.unary(OpKind::kExp, x - shift);
  V s = b.reduce_sum(ex, {-1}, true);
  V divisor = b.select(none, b.like(s, 1.0), s);
  return ex / divisor;
}

}  // namespace kvf::ir::ops
