// What every executor does before a step writes anything: the slot values checked, and the
// eqns the graph's validations need found, so that they run (and are checked) first and a
// refused step writes no state.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "ir/graph.h"

namespace kvf::exec {

// Every slot g declares is bound, has g's element count, and passes ir::check_slot.
Status check_slots(const ir::Graph& g, const SlotValues& slots);

// A step refused by validation c of g: element `element` of its witness is false. Every
// executor words it so, whether the host or the device found it.
Error validation_failed(const ir::Graph& g, const ir::Validation& c, int64_t element);

// Per eqn: whether a validation's witness depends on it.
std::vector<bool> validation_prelude(const ir::Graph& g);

// The validations of g as a graph of their own: the prelude's eqns, with witness k as the
// output named "k". An executor whose device would run the prelude and wait for its
// witnesses before the step evaluates this on the host instead (check_on_host), and
// launches the step in one go. Empty when a prelude eqn reads anything but slots, literals
// and the prelude's own values, or when any value there holds more than max_elements
// (a paged step's maps: the host would take longer than the device's round trip).
std::optional<ir::Graph> host_validations(const ir::Graph& g, int64_t max_elements);

// Evaluates `checks` (host_validations of g) on the slot values (already check_slots'd):
// the first false element of a witness refuses the step as kValidation, as the executors
// word it for g.
Status check_on_host(const ir::Graph& g, const ir::Graph& checks, const SlotValues& slots);

}  // namespace kvf::exec
