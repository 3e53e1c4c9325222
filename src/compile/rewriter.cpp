#include "compile/rewriter.h"

namespace kvf::compile {

using ir::V;
using ir::ValueKind;

Rewriter::Rewriter(const ir::Graph& src) : src_(src), b_(src.name), map_(src.values.size(), -1) {}

V Rewriter::get(ir::ValueId old) {
  ir::ValueId& slot = map_[static_cast<size_t>(old)];
  if (slot >= 0) return V{&b_, slot};
  const ir::Value& v = src_.value(old);
  V made;
  switch (v.kind) {
    case ValueKind::kSlot:
      made = v.slot_bound > 0 ? b_.map_slot(v.slot, v.type.shape, v.slot_bound) : b_.slot(v.slot, v.type.dtype, v.type.shape);
      break;
    case ValueKind::kConstant: made = b_.constant(v.name, v.data); break;
    case ValueKind::kLiteral: made = b_.literal(v.literal, v.type.dtype); break;
    case ValueKind::kState: made = b_.state(v.name, v.type.dtype, v.type.shape, v.role, v.layer); break;
    case ValueKind::kIntermediate:
      b_.fail(internal_error("rewriter: value ", old, " used before its eqn was kept or replaced"));
      return V{&b_, -1};
  }
  slot = made.id;
  return made;
}

V Rewriter::keep(const ir::Eqn& e) {
  std::vector<V> in;
  in.reserve(e.in.size());
  for (ir::ValueId x : e.in) in.push_back(get(x));
  // Params carry normalized (non-negative) axes already, which emit accepts as they are.
  V out = b_.emit(e.op, std::move(in), e.params);
  replace(e.out, out);
  const std::string& name = src_.value(e.out).name;
  if (!name.empty() && out.valid()) b_.name(out, name);
  return out;
}

void Rewriter::replace(ir::ValueId old, V now) { map_[static_cast<size_t>(old)] = now.id; }

Result<ir::Graph> Rewriter::finish() {
  for (const ir::Output& o : src_.outputs) b_.output(o.name, get(o.value));
  for (const ir::Donation& d : src_.donations) b_.donate(get(d.state_in), get(d.state_out));
  for (const ir::Validation& c : src_.validations) b_.validate(get(c.witness), c.what);
  return b_.finish();
}

}  // namespace kvf::compile
