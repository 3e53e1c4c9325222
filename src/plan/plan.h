// A plan: the compiled graph, one kernel request per eqn and the buffer plan, for one
// device. Executors run a plan; they never re-decide what it decided.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "plan/buffer_plan.h"
#include "plan/device_caps.h"
#include "plan/request.h"

namespace kvf::plan {

struct Plan {
  ir::Graph graph;
  DeviceCaps caps;
  std::vector<KernelRequest> requests;  // one per eqn, same order
  BufferPlan buffers;
};

// Requests for every eqn of an already compiled graph, schedules chosen for `caps`.
// A request the device cannot run is a typed refusal naming the eqn and what is missing.
Result<Plan> make_plan(ir::Graph g, const DeviceCaps& caps);

// The plan as text: every eqn with its kernel, the attention schedules, the arena.
std::string describe(const Plan& p);

}  // namespace kvf::plan
