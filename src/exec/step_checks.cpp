#include "exec/step_checks.h"

#include "ir/slot_check.h"

namespace kvf::exec {

Status check_slots(const ir::Graph& g, const SlotValues& slots) {
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kSlot) continue;
    auto it = slots.find(v.slot);
    if (it == slots.end()) return invalid_input(g.name, ": slot ", ir::slot_name(v.slot), " is not bound");
    const int64_t n = numel(v.type.shape);
    if (static_cast<int64_t>(it->second.size()) != n) {
      return invalid_input(g.name, ": slot ", ir::slot_name(v.slot), " has ", it->second.size(),
                           " values, the graph expects ", n);
    }
    Status s = ir::check_slot(v, it->second);
    if (!s) return s.take_error().context(g.name);
  }
  return {};
}

std::vector<bool> validation_prelude(const ir::Graph& g) {
  std::vector<bool> needed(g.values.size(), false);
  for (const ir::Validation& c : g.validations) needed[static_cast<size_t>(c.witness)] = true;
  std::vector<bool> prelude(g.eqns.size(), false);
  for (size_t i = g.eqns.size(); i-- > 0;) {
    const ir::Eqn& e = g.eqns[i];
    if (!needed[static_cast<size_t>(e.out)]) continue;
    prelude[i] = true;
    for (ir::ValueId v : e.in) needed[static_cast<size_t>(v)] = true;
  }
  return prelude;
}

}  // namespace kvf::exec
