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

// The GPU's launch order: every Linear that reads the same input as an earlier one (with the
// same weight type) moved up to follow it, and a Glu over the first two of such a group
// moved up after them, so that one launch can run the group (exec/cuda/step). Only eqns
// whose operands are that input and constants move, so the result computes the same values.
ir::Graph colocate_linears(ir::Graph g);

// Requests for every eqn of an already compiled graph, schedules chosen for `caps` (on a
// GPU, after colocate_linears).
// A request the device cannot run is a typed refusal naming the eqn and what is missing.
Result<Plan> make_plan(ir::Graph g, const DeviceCaps& caps);

// The scratch a Lora eqn over `rows` rows takes: on the CPU the rows listed by adapter and
// one adapter's rows gathered (x and A x; exec/cpu/lora.cpp), on a GPU every row's A x.
inline int64_t lora_scratch_floats(int64_t rows, int64_t in, int64_t rank, Target target) {
  return target == Target::kCuda ? rows * rank : rows * (1 + in + rank);
}

// Per eqn: a cast of a weight to f32 whose every reader is a gather of its rows. Executors
// skip it and gather from the stored table, widening only the rows read (an f16 or q8_0
// embedding table is never widened whole).
std::vector<bool> gathered_in_stored_type(const ir::Graph& g);

// The plan as text: every eqn with its kernel, the attention schedules, the arena.
std::string describe(const Plan& p);

}  // namespace kvf::plan
