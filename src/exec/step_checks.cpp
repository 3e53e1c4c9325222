#include "exec/step_checks.h"

#include <string>

#include "eval/oracle.h"
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

Error validation_failed(const ir::Graph& g, const ir::Validation& c, int64_t element) {
  return Error(ErrorCode::kValidation, str_cat(g.name, ": ", c.what, " does not hold (element ", element, ")"));
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

std::optional<ir::Graph> host_validations(const ir::Graph& g, int64_t max_elements) {
  const std::vector<bool> prelude = validation_prelude(g);
  ir::Graph checks;
  checks.name = g.name;
  std::vector<ir::ValueId> to(g.values.size(), -1);
  auto add = [&](ir::ValueId v) -> bool {  // false: not something the host can have
    const ir::Value& value = g.value(v);
    if (numel(value.type.shape) > max_elements) return false;
    if (to[static_cast<size_t>(v)] >= 0) return true;
    if (value.kind != ir::ValueKind::kSlot && value.kind != ir::ValueKind::kLiteral) return false;
    to[static_cast<size_t>(v)] = static_cast<ir::ValueId>(checks.values.size());
    checks.values.push_back(value);
    return true;
  };
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (!prelude[i]) continue;
    ir::Eqn e = g.eqns[i];
    if (ir::is_fused(e.op) || ir::is_collective(e.op) || numel(g.type(e.out).shape) > max_elements) return std::nullopt;
    for (ir::ValueId& v : e.in) {
      if (!add(v)) return std::nullopt;
      v = to[static_cast<size_t>(v)];
    }
    ir::Value out = g.value(e.out);
    out.producer = static_cast<int>(checks.eqns.size());
    to[static_cast<size_t>(e.out)] = static_cast<ir::ValueId>(checks.values.size());
    e.out = to[static_cast<size_t>(e.out)];
    checks.values.push_back(std::move(out));
    checks.eqns.push_back(std::move(e));
  }
  for (size_t k = 0; k < g.validations.size(); ++k) {
    if (!add(g.validations[k].witness)) return std::nullopt;
    checks.outputs.push_back({std::to_string(k), to[static_cast<size_t>(g.validations[k].witness)]});
  }
  return checks;
}

Status check_on_host(const ir::Graph& g, const ir::Graph& checks, const SlotValues& slots) {
  if (checks.outputs.empty()) return {};  // a step with no validations: nothing to evaluate
  eval::SlotBindings bound;
  for (const ir::Value& v : checks.values) {
    if (v.kind != ir::ValueKind::kSlot) continue;
    Result<eval::Buffer> b = eval::Buffer::i32(v.type.shape, slots.at(v.slot));
    if (!b) return b.take_error();
    bound.emplace(v.slot, std::move(*b));
  }
  eval::StateStore none;
  Result<eval::Outputs> out = eval::Oracle().run(checks, bound, none);
  if (!out) return out.take_error().context(g.name, ": the validations on the host");
  for (size_t k = 0; k < g.validations.size(); ++k) {
    const std::vector<double>& w = out->at(std::to_string(k)).data;
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i] == 0) return validation_failed(g, g.validations[k], static_cast<int64_t>(i));
    }
  }
  return {};
}

}  // namespace kvf::exec
