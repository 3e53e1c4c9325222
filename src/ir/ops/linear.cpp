// Projection compositions: linear layers over HF-layout weights and embedding lookup.
#include "ir/ops.h"

namespace kvf::ir::ops {

V linear(V x, V weight, V bias) {
  Builder& b = *x.b;
  V y = b.matmul(x, b.transpose(weight, {1, 0}));
  return bias.valid() ? y + bias : y;
}

V embed(V table, V tokens) { return table.b->gather(table, tokens); }

}  // namespace kvf::ir::ops
