// The fixed pass order: canonicalize → cse → rope recognition → attention rewrite → dce →
// fusion (DESIGN.md §3).
#pragma once

#include <string>
#include <vector>

#include "compile/pass.h"

namespace kvf::compile {

struct Compiled {
  ir::Graph graph;
  std::vector<std::string> applied;  // pass names, in order
};

// Runs passes in order, verifying the graph after each.
Result<Compiled> run_passes(const ir::Graph& g, const std::vector<Pass>& passes);

}  // namespace kvf::compile
