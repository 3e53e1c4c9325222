// Projection compositions: linear layers over HF-layout weights and embedding lookup.
#include "ir/ops.h"

namespace kvf::ir::ops {

V linear(V x, V weight, V bias) {
  Builder& b = *x.b;
  V y = b.matmul(x, b.transpose(weight, {1, 0}));
  if (bias.valid()) y = y + bias;
  return b.linear_hook() ? b.linear_hook()(x, weight, y) : y;
}

V embed(V table, V tokens) { return table.b->gather(table, tokens); }

}  // namespace kvf::ir::ops
