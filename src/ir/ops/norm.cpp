// Normalization compositions: RMSNorm (plain and Gemma's 1 + w) and LayerNorm.
#include "ir/ops.h"

namespace kvf::ir::ops {

V rmsnorm(V x, V weight, double eps, bool unit_offset) {
  Builder& b = *x.b;
  const double dim = static_cast<double>(x.dim(-1));
  V ms = b.reduce_sum(x * x, {-1}, true) / dim;
  V normed = x * b.unary(OpKind::kRsqrt, ms + eps);
  return normed * (unit_offset ? weight + 1.0 : weight);
}

V layernorm(V x, V weight, V bias, double eps) {
  Builder& b = *x.b;
  const double dim = static_cast<double>(x.dim(-1));
  V centered = x - b.reduce_sum(x, {-1}, true) / dim;
  V var = b.reduce_sum(centered * centered, {-1}, true) / dim;
  V y = centered * b.unary(OpKind::kRsqrt, var + eps) * weight;
  return bias.valid() ? y + bias : y;
}

}  // namespace kvf::ir::ops
