// Pattern matching shared by the passes (private to compile/): who reads each value, what
// defines it, literal tests, and applying chain -> fused-eqn matches to a graph. Not a
// general rewriting engine: each pass spells its own chain out in plain code.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compile/rewriter.h"

namespace kvf::compile {

// Who reads each value, counting dead eqns too (a reader is a reader until dce says not).
class Uses {
 public:
  explicit Uses(const ir::Graph& g);
  // Eqn indices reading v, once per operand position.
  const std::vector<size_t>& readers(ir::ValueId v) const { return readers_[static_cast<size_t>(v)]; }
  // An output, a donated state_out or a validation witness: needed beyond the eqns.
  bool is_root(ir::ValueId v) const { return root_[static_cast<size_t>(v)]; }

 private:
  std::vector<std::vector<size_t>> readers_;
  std::vector<bool> root_;
};

// The eqn defining v, or null for a leaf.
const ir::Eqn* producer(const ir::Graph& g, ir::ValueId v);
// The eqn defining v when it is `op`, else null.
const ir::Eqn* def(const ir::Graph& g, ir::ValueId v, ir::OpKind op);
// The value a chain of reshapes starts from: reshape(reshape(x)) reads x.
ir::ValueId reshape_source(const ir::Graph& g, ir::ValueId v);
// v is a literal holding exactly x (an exact compare: -0 == +0 here).
bool is_literal(const ir::Graph& g, ir::ValueId v, double x);
// v is a literal within rel_tol of x (irrational constants written to fewer digits).
bool is_literal_near(const ir::Graph& g, ir::ValueId v, double x, double rel_tol);
// Every field of p as text (doubles by their bits): two eqns of one op with equal keys have
// equal params.
std::string params_key(const ir::Params& p);
// A reduction over exactly the last axis of x, keeping it as size 1.
bool reduces_last_axis_keepdim(const ir::Graph& g, const ir::Eqn& e);
// A slice of its operand that keeps every axis whole except the last, which runs
// [start, limit) in unit steps.
bool slices_last_axis(const ir::Graph& g, const ir::Eqn& e, int64_t start, int64_t limit);

// Collects the eqns a matcher walks through; they become the chain's body.
class Chain {
 public:
  explicit Chain(const ir::Graph& g) : g_(&g) {}
  // The eqn defining v when it is `op`, recorded in the body; else null.
  const ir::Eqn* take(ir::ValueId v, ir::OpKind op);
  const std::vector<size_t>& body() const { return body_; }

 private:
  const ir::Graph* g_;  // a pointer, so a tentative copy can be assigned back
  std::vector<size_t> body_;
};

// One chain to replace: the eqns of `body` are dropped and `root`'s output becomes
// op(operands)[params]. Every operand must be read by the chain itself, so it is defined
// before root.
struct Match {
  size_t root = 0;
  std::vector<size_t> body;
  ir::OpKind op = ir::OpKind::kAdd;
  std::vector<ir::ValueId> operands;
  ir::Params params;
  // The fused eqn holds root's elements in another shape: a reshape to root's shape
  // follows it (a chain whose last reshape an earlier fold merged into its readers).
  bool reshape_to_root = false;
  // Operand 0 is read in this shape, through a reshape emitted before the fused eqn
  // (a reshape an earlier fold merged into the chain's first reshape).
  std::optional<Shape> reshape_first;
};

// The candidates to apply: those whose body nothing else reads (no value of it is read
// outside the chain or needed as a root) and whose fused eqn types exactly as root's
// output (with reshape_to_root: the same dtype and element count; reshape_first must keep
// operand 0's element count). Where candidates
// overlap, the one with the larger body wins; the others keep their eqns.
std::vector<Match> select_matches(const ir::Graph& g, std::vector<Match> candidates);
// Rewrites g with matches select_matches chose.
Result<ir::Graph> apply_selected(const ir::Graph& g, const std::vector<Match>& selected);
inline Result<ir::Graph> apply_matches(const ir::Graph& g, std::vector<Match> candidates) {
  return apply_selected(g, select_matches(g, std::move(candidates)));
}

// Tries f(a, b) and f(b, a) over a binary eqn's operands (a commutative op).
template <class F>
bool either_order(const ir::Eqn& e, F&& f) {
  return e.in.size() == 2 && (f(e.in[0], e.in[1]) || f(e.in[1], e.in[0]));
}

}  // namespace kvf::compile
