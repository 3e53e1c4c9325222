// ModelRunner: what a Generator and the paged driver step through: the steps of one model
// and the state they share, run by one StepRunner (llm/step_runner.h) or by the
// tensor-parallel ranks of a ParallelGroup (llm/parallel_group.h).
#pragma once

#include <cstdint>
#include <span>

#include "core/error.h"
#include "exec/executor.h"
#include "exec/row_draw.h"
#include "models/model.h"

namespace kvf::llm {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Runs one step of shape `spec` on `slots`; returns the whole "logits" output, row-major,
  // valid until the next run. A refused step writes no state.
  virtual Result<std::span<const float>> run(const models::StepSpec& spec, const exec::SlotValues& slots) = 0;
  // The same step, returning only each logits row's greedy token (exec::row_argmax). Valid
  // until the next run.
  virtual Result<std::span<const int32_t>> run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) = 0;
  // The same step, returning the token drawn for each of the first draws.rows.size() rows
  // (exec/row_draw.h). Valid until the next run.
  virtual Result<std::span<const int32_t>> run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                                      const exec::StepDraws& draws) = 0;
  // Whether callers draw through run_sample: it draws on the device that holds the logits,
  // or, for a group of such ranks, by the same rule on the host (exec::draw_rows), so that a
  // request samples the tokens one device gives it. Else the host's Sampler draws.
  virtual bool samples_on_device() const = 0;
  // Makes the step of shape `spec` ready now, so that a refusal comes before any step runs.
  virtual Status prepare(const models::StepSpec& spec) = 0;
  // Bytes the state (KV caches, or the oracle's cells) holds now.
  virtual int64_t state_bytes() const = 0;
  // Forgets the state; the traced steps are kept.
  virtual void reset_state() = 0;
  // Forgets the traced steps and their executors; the state is kept (the next steps bind to
  // it again). For when what a step's graph holds changed: the LoRA adapters.
  virtual void forget_steps() = 0;

  // Step shapes made ready so far, and the seconds that took: a step that meets a new shape
  // pays for it.
  virtual int64_t shapes_prepared() const = 0;
  virtual double prepare_seconds() const = 0;
  // Seconds inside the steps' runs: a step's time less this is what the host spent around it.
  virtual double run_seconds() const = 0;
};

}  // namespace kvf::llm
