// The compiler's passes (DESIGN.md §3): each rewrites a Graph into an equivalent Graph and
// declares how equal: exact passes keep every bit of every output on the oracle;
// reassociating ones (fused reductions, online softmax) keep them within float tolerance.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace kvf::compile {

enum class Exactness { kExact, kReassociating };

struct Pass {
  std::string name;
  Exactness exactness = Exactness::kExact;
  Result<ir::Graph> (*run)(const ir::Graph&) = nullptr;
};

}  // namespace kvf::compile
