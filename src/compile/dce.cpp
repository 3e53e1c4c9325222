// dce (exact): drops eqns whose value nothing needs. The roots are the graph's outputs,
// its donations' state_out (the cache writes) and its validation witnesses (the guards),
// so a guard or a cache write is never dropped; so is every collective (all_reduce), which
// every rank of the group must run whether or not this rank reads it. Leaves only dead eqns
// read disappear with them (the Rewriter recreates leaves on first use).
#include "compile/passes.h"
#include "compile/rewriter.h"

namespace kvf::compile {
namespace {

// Per eqn: does a root depend on it? One backward sweep, since eqns are in SSA order.
std::vector<bool> live_eqns(const ir::Graph& g) {
  std::vector<bool> needed(g.values.size(), false), live(g.eqns.size(), false);
  for (const ir::Output& o : g.outputs) needed[static_cast<size_t>(o.value)] = true;
  for (const ir::Donation& d : g.donations) needed[static_cast<size_t>(d.state_out)] = true;
  for (const ir::Validation& c : g.validations) needed[static_cast<size_t>(c.witness)] = true;
  for (size_t i = g.eqns.size(); i-- > 0;) {
    const ir::Eqn& e = g.eqns[i];
    if (!needed[static_cast<size_t>(e.out)] && !ir::is_collective(e.op)) continue;
    live[i] = true;
    for (ir::ValueId v : e.in) needed[static_cast<size_t>(v)] = true;
  }
  return live;
}

Result<ir::Graph> dce(const ir::Graph& g) {
  const std::vector<bool> live = live_eqns(g);
  return rewrite_each(g, [&](Rewriter&, size_t i) { return !live[i]; });
}

}  // namespace

Pass dce_pass() { return {"dce", Exactness::kExact, dce}; }

}  // namespace kvf::compile
