// Rewriter: how a pass builds its output graph. It walks the source graph's equations in
// order; each one is either kept (copied with its operands renamed) or replaced by what the
// pass emits, after which uses of the old value read the replacement. Leaves (slots,
// constants, literals, state) are recreated on first use, so leaves nothing reads vanish.
#pragma once

#include <vector>

#include "ir/builder.h"

namespace kvf::compile {

class Rewriter {
 public:
  explicit Rewriter(const ir::Graph& src);

  const ir::Graph& src() const { return src_; }
  ir::Builder& builder() { return b_; }

  // The new-graph handle of a source value (creating a leaf on first use).
  ir::V get(ir::ValueId old);
  // Copies source eqn e with its operands renamed; its output keeps the stable name.
  ir::V keep(const ir::Eqn& e);
  // Uses of old read `now` from here on.
  void replace(ir::ValueId old, ir::V now);
  bool has(ir::ValueId old) const { return map_[static_cast<size_t>(old)] >= 0; }

  // Emits a fused or primitive eqn over new-graph handles (typed by ir::infer).
  ir::V emit(ir::OpKind op, std::vector<ir::V> in, ir::Params params = {}) { return b_.emit(op, std::move(in), params); }

  // Copies outputs, donations and validations (renamed) and returns the verified graph.
  // Every source value they name must have been kept or replaced.
  Result<ir::Graph> finish();

 private:
  const ir::Graph& src_;
  ir::Builder b_;
  std::vector<ir::ValueId> map_;  // source value -> new value, -1 until defined
};

// The common pass body: keeps every eqn for which `rewrite` returns false.
// rewrite(rw, eqn_index) may emit and replace(eqn.out, ...) and then return true.
template <class Fn>
Result<ir::Graph> rewrite_each(const ir::Graph& g, Fn&& rewrite) {
  Rewriter rw(g);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (!rewrite(rw, i)) rw.keep(g.eqns[i]);
  }
  return rw.finish();
}

}  // namespace kvf::compile
