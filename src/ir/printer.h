// Text form of a Graph, one eqn per line in the manner of a jaxpr; golden tests pin it.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kvf::ir {

// { graph NAME ; constants and state ; slots .
//   %7:f32[1,4] = add %5 %6
//   out NAME = %v   /  donate STATE <- %v   /  check %v "what"
// }
std::string print(const Graph& g);

// One eqn as print() writes it: "%7:f32[1,4] = add %5 %6".
std::string eqn_str(const Graph& g, const Eqn& e);

// How eqns and the header refer to a value: its name, "%N" (N = its eqn), or an inline literal.
std::string value_ref(const Graph& g, ValueId id);

}  // namespace kvf::ir
