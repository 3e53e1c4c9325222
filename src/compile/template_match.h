// Proof that a chain of a graph is one ops:: composition (private to compile/): the
// composition is traced over typed stand-ins for its inputs (a template), put through the
// passes that ran before the caller (canonicalize, cse), and unified with the graph from a
// root down: the same op, params and type at every eqn, the same literal bits, the same
// constant, until each template input meets a graph value, which it binds (one value per
// input). A chain of reshapes counts as one reshape of its source, whichever way
// canonicalize folded it. A pass builds the template from what it read off the chain (sizes, k, ratio) and
// replaces the chain only when unification succeeds; anything else keeps its eqns.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/error.h"
#include "ir/builder.h"
#include "ir/graph.h"

namespace kvf::compile {

struct Template {
  ir::Graph graph;
  ir::ValueId root = -1;
  std::vector<ir::ValueId> inputs;
};

using TemplateTrace = std::function<ir::V(ir::Builder&, std::span<const ir::V>)>;

// `trace` receives one value per input type and returns the root.
Result<Template> make_template(const std::vector<ir::TensorType>& inputs, const TemplateTrace& trace);

// The graph values the template's inputs bind to when the chain of g at `root` is the
// template's; nullopt otherwise.
std::optional<std::vector<ir::ValueId>> unify(const Template& t, const ir::Graph& g, ir::ValueId root);

}  // namespace kvf::compile
