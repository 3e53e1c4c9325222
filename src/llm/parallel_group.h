// ParallelGroup: one model run by `size` ranks stepping in lockstep, each rank a thread of
// this process with its own StepRunner (executor or oracle, KV state) and its handle on one
// group of ranks, on whose threads the ranks run and through which the step's collectives
// meet. Tensor parallel: each rank holds its share of the weights (models::tp_weights) and
// the step's all-reduces sum the ranks' partial products. Context parallel (the GPU): each
// rank holds the whole model; a paged pool is shared out by blocks (each rank holds its
// blocks and runs every attention over them), a dense cache is held whole (each decode
// attention reads the rank's blocks of positions); the ranks' partials are gathered and
// merged by log-sum-exp (exec/cuda/step/executor.h). Every rank ends a step with the whole logits; run returns
// rank 0's. As a ModelRunner it is what a Generator steps through for `kvforge generate
// --tp N` and `--cp N --device cuda`.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/collective.h"
#include "llm/model_runner.h"
#include "llm/step_runner.h"
#include "models/model.h"

namespace kvf::llm {

class ParallelGroup final : public ModelRunner {
 public:
  // The model split over `size` tensor-parallel ranks (models::tp_config refuses what does not split). Each
  // rank's runner takes `opts` with its own group handle and opts.threads / size threads (0:
  // the hardware threads shared out). On the CUDA executor with several GPUs visible, rank r
  // runs on GPU r and the all-reduces meet on NCCL (exec/cuda/step/nccl_group.h; refused
  // when it cannot load or there are fewer GPUs than ranks). With one GPU every rank opens it
  // (its own stream, weights and KV) and their all-reduces meet on the host through pinned
  // memory, eqn by eqn with no graph: one GPU checks the split, it does not speed it up.
  // A decode-attention backend is refused (one backend cannot serve the ranks' threads at once).
  static Result<std::unique_ptr<ParallelGroup>> tensor_parallel(const models::Model& model, int size,
                                                                RunnerOptions opts = {});
  // The model on `size` context-parallel ranks of the CUDA executor, each holding all of it
  // (the group keeps no copy: `model` outlives it), GPUs and sums placed as for tensor
  // parallelism (on one GPU every rank shares it and the partials meet on the host). A
  // paged step's pools are shared out by llm::kv::kBlockTokens-slot blocks (block b on rank
  // b mod size) and all its attention runs over each rank's blocks; over a dense cache, which
  // every rank holds whole, the decode attention runs over the rank's blocks of positions and
  // a prefill runs whole on every rank. kUnsupported on another executor (the CPU's context
  // parallelism is exec/context_parallel.h, an attention backend), with an attention backend
  // or with a tensor-parallel group.
  static Result<std::unique_ptr<ParallelGroup>> context_parallel(const models::Model& model, int size,
                                                                 RunnerOptions opts = {});
  // The group `tp` tensor-parallel or `cp` context-parallel ranks make (one of them above 1)
  // for `user` (a "generator", a "driver"); both above 1 at once is refused (kUnsupported),
  // naming the user.
  static Result<std::unique_ptr<ParallelGroup>> open(const models::Model& model, int tp, int cp, RunnerOptions opts,
                                                     const char* user);

  ~ParallelGroup() override;
  int size() const { return group_.size(); }
  // Runs the step on every rank, each on its own thread (ThreadGroup::run), and returns
  // rank 0's logits, valid until the next run. A rank that fails leaves the group (the others'
  // collectives fail rather than wait) and its error is the step's; the group is whole again
  // for the next step.
  Result<std::span<const float>> run(const models::StepSpec& spec, const exec::SlotValues& slots) override;
  // The same step's greedy tokens, from rank 0's logits on the host. Valid until the next run.
  Result<std::span<const int32_t>> run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) override;
  // The same step, drawn on the host from rank 0's logits by the device's rule
  // (exec::draw_rows). Valid until the next run.
  Result<std::span<const int32_t>> run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                              const exec::StepDraws& draws) override;
  // As its ranks: GPU ranks' group draws by their rule (run_sample above), the CPU's does not.
  bool samples_on_device() const override { return runners_[0]->samples_on_device(); }
  // Every rank's step of shape `spec` made ready (a rank's refusal is the group's).
  Status prepare(const models::StepSpec& spec) override;
  // The ranks' state together (each holds its own heads' KV caches).
  int64_t state_bytes() const override;
  void reset_state() override;
  void forget_steps() override;
  // Rank 0's (the ranks prepare the same shapes, at once).
  int64_t shapes_prepared() const override { return runners_[0]->shapes_prepared(); }
  double prepare_seconds() const override { return runners_[0]->prepare_seconds(); }
  // The group's runs, from the first rank's start to the last rank's end.
  double run_seconds() const override { return run_seconds_; }
  // Rank r's logits of the last run (all ranks hold the same).
  std::span<const float> logits(int rank) const { return logits_[static_cast<size_t>(rank)]; }

 private:
  ParallelGroup(int size, int64_t vocab) : group_(size), vocab_(vocab) {}
  Status open_gpus(const RunnerOptions& opts);
  RunnerOptions rank_options(const RunnerOptions& opts, int r);
  // Where the ranks' all-reduces meet: their GPUs' group, else the threads' own.
  RankGroup& sums() { return gpus_ ? *gpus_ : group_; }

  ThreadGroup group_;                 // the ranks' threads (and their sums on the host)
  std::unique_ptr<RankGroup> gpus_;   // a group of GPUs, or null
  std::vector<std::unique_ptr<models::Model>> ranks_;  // tensor parallel: each rank's config and weights (runners read them)
  std::vector<std::unique_ptr<StepRunner>> runners_;
  std::vector<std::span<const float>> logits_;        // each rank's last logits
  std::vector<int32_t> drawn_;                        // run_argmax's and run_sample's tokens
  double run_seconds_ = 0;
  int64_t vocab_;
};

}  // namespace kvf::llm
