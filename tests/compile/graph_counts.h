// Counting eqns by opcode: what the pass tests assert about a rewritten graph.
#pragma once

#include "ir/graph.h"

namespace kvf::testing {

inline int count(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const ir::Eqn& e : g.eqns) n += e.op == op;
  return n;
}

}  // namespace kvf::testing
