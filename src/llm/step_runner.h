// StepRunner: runs traced steps of one model on one executor, keeping everything that lives
// across steps: the graphs and bound executors of every step shape seen so far (each is
// traced, compiled and planned once, then replayed) and the state they share (the KV caches
// or pools: a prefill plan and a decode plan write the same buffers). The Generator (one
// contiguous sequence, through the ModelRunner interface) and the paged driver both step
// through it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "compile/widen_constants.h"
#include "core/thread_pool.h"
#include "eval/oracle.h"
#include "exec/cpu/executor.h"
#include "exec/executor.h"
#include "exec/state.h"
#include "llm/model_runner.h"
#include "models/model.h"

namespace kvf::llm {

// kCpu: the compiled step on this CPU; kOracle: the reference interpreter; kCuda: the
// compiled step on a GPU (RunnerOptions::gpu; a build without CUDA, or a machine without a
// GPU, refuses it).
enum class ExecutorKind { kCpu, kOracle, kCuda };

// What products compute from (--dtype). kAuto: a GPU takes 16-bit inputs where its tensor
// cores run the product (plan::DeviceCaps::half_compute); the CPU computes in f32 anyway.
// kF32: every product from f32 inputs, on every device.
enum class Compute { kAuto, kF32 };

struct RunnerOptions {
  ExecutorKind executor = ExecutorKind::kCpu;
  Compute compute = Compute::kAuto;
  eval::Precision precision = eval::Precision::kNative;  // oracle only
  int threads = 0;  // 0: one per hardware thread
  std::vector<std::string> skip_passes;  // compiler passes left out (benchmarks: "attention")
  // Non-null (CPU executor only): the Attention eqns of decode steps (one new token per row)
  // run on this backend, e.g. the AHBM simulator; those of prefill and chunk steps on
  // prefill_attention (null: the host's kernel). Not owned; they outlive the runner.
  exec::AttentionBackend* decode_attention = nullptr;
  exec::AttentionBackend* prefill_attention = nullptr;
  // The backend a step of n_tokens new tokens per row places its Attention eqns on, or null.
  exec::AttentionBackend* attention_for(int64_t n_tokens) const {
    return n_tokens == 1 ? decode_attention : prefill_attention;
  }
  // A backend placed on some step, or null: the executors other than the CPU's refuse it.
  exec::AttentionBackend* placed_backend() const { return decode_attention ? decode_attention : prefill_attention; }
  // Non-null: this runner is one rank of a tensor-parallel group (llm/parallel_group.h), and the
  // step's all_reduce eqns sum over it (every executor). Not owned.
  Collective* group = nullptr;
  // > 0 (kCuda): `group` is context parallel instead and this runner one of its ranks
  // (ParallelGroup::context_parallel): it holds its blocks of kv_block slots of a paged pool
  // and its attention reads only its keys, the ranks' partials merged
  // (exec/cuda/step/executor.h).
  int64_t kv_block = 0;
  int gpu = 0;  // kCuda: the GPU the steps run on (a rank of a group of GPUs: its own)
};

// The traced step graph compiled by the default passes (less `skip`) and planned for `caps`.
// The GPU has no k-quant kernels: there such weights run as f16, dequantized once per model
// into `widened` (the caller keeps it with the model; null: for this graph alone).
Result<plan::Plan> compile_step(const ir::Graph& traced, const plan::DeviceCaps& caps,
                                const std::vector<std::string>& skip = {}, compile::WidenedConstants* widened = nullptr);

class StepRunner final : public ModelRunner {
 public:
  StepRunner(const models::Model& model, RunnerOptions opts = {});

  // Runs one step of shape `spec` on `slots` (token, pos, and the maps of a paged step);
  // returns the "logits" output, row-major, valid until the next run (a batch's logits are
  // megabytes: read in place, not copied). A refused step (a bad slot, a failed validation)
  // writes no state.
  Result<std::span<const float>> run(const models::StepSpec& spec, const exec::SlotValues& slots) override;
  // The same step, returning only each logits row's greedy token (exec::row_argmax): on a
  // GPU only the ids cross the link. Valid until the next run.
  Result<std::span<const int32_t>> run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) override;
  // The same step, returning the token drawn for each of the first draws.rows.size() rows
  // (exec/row_draw.h): on a GPU drawn there, so again only the ids cross the link. Valid
  // until the next run.
  Result<std::span<const int32_t>> run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                              const exec::StepDraws& draws) override;
  // Whether run_sample draws on the device that holds the logits (the CUDA executor); a host
  // backend's logits are as cheap to sample where they are.
  bool samples_on_device() const override { return opts_.executor == ExecutorKind::kCuda; }
  // Traces, compiles, plans and binds the step of shape `spec` now (compiled executors), so
  // that a refusal (no GPU, a placement the backend does not run) comes before any step has run.
  Status prepare(const models::StepSpec& spec) override;

  ExecutorKind executor() const { return opts_.executor; }
  // Bytes the state holds now: the executor's buffers in their dtype (host or device), or
  // the oracle's f64 cells.
  int64_t state_bytes() const override;
  // Forgets the state (and the executors bound to it); graphs are kept.
  void reset_state() override;
  void forget_steps() override {
    executors_.clear();
    graphs_.clear();
  }
  // A shape is prepared when traced, and for a compiled executor compiled, planned and bound.
  int64_t shapes_prepared() const override { return shapes_prepared_; }
  double prepare_seconds() const override { return prepare_seconds_; }
  // The executors' runs: copies in, the step, copies out and the wait for them.
  double run_seconds() const override { return run_seconds_; }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, DType, int64_t, int64_t, const models::LoraSet*>;
  static Key key_of(const models::StepSpec& s);
  Result<const ir::Graph*> graph_for(const models::StepSpec& spec);
  Result<exec::Executor*> executor_for(const models::StepSpec& spec);
  Result<std::unique_ptr<exec::Executor>> bind(plan::Plan plan, const models::StepSpec& spec);
  Result<plan::DeviceCaps> caps();
  Result<std::span<const float>> run_oracle(const ir::Graph& g, const exec::SlotValues& slots);
  // f() (an executor's run), its time added to run_seconds_.
  template <typename F>
  auto timed(F f) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f();
    run_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  void note_prepared(std::chrono::steady_clock::time_point since);

  const models::Model& model_;
  RunnerOptions opts_;
  eval::Oracle oracle_;
  eval::StateStore oracle_state_;
  std::vector<float> oracle_logits_;  // the oracle's last logits, as f32
  std::vector<int32_t> oracle_ids_;   // their rows' greedy or drawn tokens (run_argmax, run_sample)
  std::unique_ptr<ThreadPool> pool_;
  exec::StateStore cpu_state_;
  std::unique_ptr<exec::Memory> device_;      // kCuda: the GPU (its memory, stream and weights)
  std::unique_ptr<exec::StateStore> device_state_;
  std::map<Key, ir::Graph> graphs_;
  compile::WidenedConstants widened_;  // k-quant weights as f16, for the GPU
  std::map<Key, std::unique_ptr<exec::Executor>> executors_;
  int64_t shapes_prepared_ = 0;
  double prepare_seconds_ = 0;
  double run_seconds_ = 0;
};

}  // namespace kvf::llm
