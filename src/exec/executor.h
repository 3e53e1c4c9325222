// The executor interface (DESIGN.md §1, exec/): a backend runs one planned step per call.
// Slots arrive as host i32 vectors; outputs are read back as f32 until the next run.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/graph.h"

namespace kvf::exec {

using SlotValues = std::map<ir::Slot, std::vector<int32_t>>;

class Executor {
 public:
  virtual ~Executor() = default;
  // Binds the slots, checks the graph's validations before anything is written, runs the
  // step and publishes outputs and state. A failure leaves outputs unpublished.
  virtual Status run(const SlotValues& slots) = 0;
  // An f32 output of the last successful run (empty if the name is not an output).
  virtual std::span<const float> output(const std::string& name) const = 0;
};

}  // namespace kvf::exec
