// Graph helpers and the structural verifier.
#include "ir/graph.h"

#include <set>

#include "ir/infer.h"

namespace kvf::ir {

std::string type_str(const TensorType& t) { return str_cat(dtype_name(t.dtype), shape_str(t.shape)); }

std::string_view slot_name(Slot s) {
  switch (s) {
    case Slot::kPos: return "pos";
    case Slot::kToken: return "token";
    case Slot::kSeqLen: return "seq_len";
    case Slot::kSlotMap: return "slot_map";
    case Slot::kWriteMap: return "write_map";
    case Slot::kKeyPos: return "key_pos";
    case Slot::kAdapter: return "adapter";
  }
  return "?";
}

ValueId Graph::find_slot(Slot s) const {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].kind == ValueKind::kSlot && values[i].slot == s) return static_cast<ValueId>(i);
  }
  return -1;
}

ValueId Graph::find_output(const std::string& name) const {
  for (const Output& o : outputs) {
    if (o.name == name) return o.value;
  }
  return -1;
}

namespace {

Status verify_eqns(const Graph& g) {
  const ValueId n = static_cast<ValueId>(g.values.size());
  std::vector<bool> defined(g.values.size(), false);
  for (ValueId v = 0; v < n; ++v) defined[v] = g.value(v).kind != ValueKind::kIntermediate;
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    const Eqn& eq = g.eqns[e];
    std::vector<TensorType> in;
    for (ValueId v : eq.in) {
      if (v < 0 || v >= n || !defined[v]) return internal_error("eqn ", e, " uses value ", v, " before it is defined");
      in.push_back(g.type(v));
    }
    if (eq.out < 0 || eq.out >= n || defined[eq.out]) return internal_error("eqn ", e, " redefines value ", eq.out);
    if (g.value(eq.out).producer != static_cast<int>(e)) return internal_error("eqn ", e, " output has wrong producer");
    Result<TensorType> t = infer(eq.op, eq.params, in);
    if (!t) return t.take_error().context("eqn ", e);
    if (*t != g.type(eq.out)) {
      return internal_error("eqn ", e, " declares ", type_str(g.type(eq.out)), " but infers ", type_str(*t));
    }
    defined[eq.out] = true;
  }
  for (ValueId v = 0; v < n; ++v) {
    if (!defined[v]) return internal_error("value ", v, " has no defining eqn");
  }
  return {};
}

// Leaves (slots, constants, state) and intermediates ("%name") are separate namespaces.
Status verify_names(const Graph& g) {
  std::set<std::string> leaves, intermediates;
  for (const Value& v : g.values) {
    if (v.name.empty()) continue;
    auto& names = v.kind == ValueKind::kIntermediate ? intermediates : leaves;
    if (!names.insert(v.name).second) return internal_error("value name '", v.name, "' is used twice");
  }
  return {};
}

}  // namespace

Status check_group(const Graph& g, const Collective* group, std::string_view who) {
  if (group != nullptr) return {};
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (is_collective(g.eqns[i].op)) {
      return invalid_input(who, ": graph ", g.name, " eqn ", i, " is an ", op_name(g.eqns[i].op),
                           " over a group of ranks, and none was given");
    }
  }
  return {};
}

Status verify(const Graph& g) {
  Status s = verify_eqns(g);
  if (!s) return s;
  s = verify_names(g);
  if (!s) return s;
  const ValueId n = static_cast<ValueId>(g.values.size());
  auto in_range = [&](ValueId v) { return v >= 0 && v < n; };
  std::set<std::string> output_names;
  for (const Output& o : g.outputs) {
    if (!in_range(o.value)) return internal_error("output '", o.name, "' names no value");
    if (!output_names.insert(o.name).second) return internal_error("output '", o.name, "' is declared twice");
  }
  std::set<ValueId> donated;
  for (const Donation& d : g.donations) {
    if (!in_range(d.state_in) || !in_range(d.state_out) || g.value(d.state_in).kind != ValueKind::kState) {
      return internal_error("donation must pair a state value with a value");
    }
    if (g.type(d.state_in) != g.type(d.state_out)) {
      return internal_error("donation of ", g.value(d.state_in).name, " changes its type to ", type_str(g.type(d.state_out)));
    }
    if (!donated.insert(d.state_in).second) return internal_error("state ", g.value(d.state_in).name, " donated twice");
  }
  for (const Validation& c : g.validations) {
    if (!in_range(c.witness) || g.type(c.witness).dtype != DType::kBool) {
      return internal_error("validation '", c.what, "' witness is not a pred value");
    }
  }
  return {};
}

}  // namespace kvf::ir
