// The executor interface (DESIGN.md §1, exec/): a backend runs one planned step per call.
// Slots arrive as host i32 vectors; outputs are read back as f32 until the next run, or only
// each row's greedy token of one of them (run_argmax), or a token drawn on the backend's
// device (run_sample).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/row_draw.h"
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
  // Runs the step as run() does and returns the row_argmax of each `row` elements of output
  // `name` (a row of logits each). A backend whose outputs live in device memory overrides it
  // to bring back only the ids (output(name) is then not read back); here they are taken
  // from output(name).
  virtual Result<std::span<const int32_t>> run_argmax(const SlotValues& slots, const std::string& name, int64_t row);
  // Whether run_sample draws where the outputs are, so that only the ids come back (a host
  // backend's draw reads its output in place: no better than the host's own sampler).
  virtual bool samples_on_device() const { return false; }
  // Runs the step and draws the token of each of the first draws.rows.size() rows of `row`
  // elements of output `name` (exec/row_draw.h); a device backend edits its output in place
  // and does not read it back. Here: draw_row on output(name).
  virtual Result<std::span<const int32_t>> run_sample(const SlotValues& slots, const std::string& name, int64_t row,
                                                      const StepDraws& draws);

 protected:
  std::vector<int32_t> ids_;  // run_argmax's (or run_sample's) answer, valid until the next run
};

}  // namespace kvf::exec
