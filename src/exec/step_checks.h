// What every executor does before a step writes anything: the slot values checked, and the
// eqns the graph's validations need found, so that they run (and are checked) first and a
// refused step writes no state.
#pragma once

#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "ir/graph.h"

namespace kvf::exec {

// Every slot g declares is bound, has g's element count, and passes ir::check_slot.
Status check_slots(const ir::Graph& g, const SlotValues& slots);

// Per eqn: whether a validation's witness depends on it.
std::vector<bool> validation_prelude(const ir::Graph& g);

}  // namespace kvf::exec
