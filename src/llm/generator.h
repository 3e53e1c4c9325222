// Generator: runs a Model's steps over a fixed-capacity contiguous KV cache. By default each
// step length is traced once, compiled (compile/), planned for this CPU (plan/) and bound
// to the CPU executor, which replays it per call; ExecutorKind::kOracle keeps the oracle.
// Prefill and decode are the same call: a step over n new tokens at the next positions.
// Generator::open can split the model over tensor-parallel ranks (llm/parallel_group.h).
#pragma once

#include <memory>
#include <vector>

#include "llm/model_runner.h"
#include "llm/step_runner.h"

namespace kvf::llm {

struct GeneratorOptions {
  ExecutorKind executor = ExecutorKind::kCpu;
  Compute compute = Compute::kAuto;  // what products compute from (RunnerOptions)
  eval::Precision precision = eval::Precision::kNative;  // oracle only
  int threads = 0;  // 0: one per hardware thread
  bool last_logits = false;  // step() returns the last position's logits only (generation)
  DType kv_dtype = DType::kF32;  // the KV cache's element type: f32, or f16 (half the bytes)
  int64_t window = 0, sinks = 0;  // a StreamingLLM mask over every layer (models::StepSpec)
  std::vector<std::string> skip_passes;  // compiler passes left out (benchmarks: "attention")
  exec::AttentionBackend* decode_attention = nullptr;   // decode steps' attention there (RunnerOptions)
  exec::AttentionBackend* prefill_attention = nullptr;  // prefill and chunk steps' attention there
  // LoRA: the adapters the steps hold (outliving the generator) and the one this sequence
  // uses, 1-based (0: the base model, through the same steps).
  const models::LoraSet* lora = nullptr;
  int32_t adapter = 0;
};

class Generator {
 public:
  // capacity <= 0 means the model's context length.
  Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts = {});
  // The same, with the model split over `tp_ranks` tensor-parallel ranks, or its KV cache's
  // keys over `cp_ranks` context-parallel ranks (the CUDA executor), stepping in lockstep (a
  // ParallelGroup, each rank's runner taking these options and a share of opts.threads); 1 and
  // 1 is the constructor's generator. A model that does not split (models::tp_config), an
  // attention backend, both kinds of ranks at once and context parallelism off the CUDA
  // executor are refused (kUnsupported).
  static Result<std::unique_ptr<Generator>> open(const models::Model& model, int64_t capacity, GeneratorOptions opts,
                                                 int tp_ranks, int cp_ranks = 1);

  // Runs `tokens` at positions position()..; returns the logits of every new position,
  // row-major [tokens.size(), vocab] (of the last one only with last_logits).
  // Refuses (kCapacity) a step past the cache.
  Result<std::vector<float>> step(const std::vector<int32_t>& tokens);
  // The same step (with last_logits), drawing the next token by `draws` (one row,
  // exec/row_draw.h) where the logits are: from a GPU only the id comes back.
  Result<int32_t> step_draw(const std::vector<int32_t>& tokens, const exec::StepDraws& draws);
  // Whether step_draw draws on a device (else on the host, from the logits).
  bool samples_on_device() const { return runner_->samples_on_device(); }
  // Binds the one-token (decode) step now: a placement refusal comes before the prefill.
  Status prepare_decode();

  int64_t position() const { return pos_; }
  int64_t capacity() const { return capacity_; }
  int64_t vocab() const { return model_.config.vocab; }
  ExecutorKind executor() const { return opts_.executor; }
  DType kv_dtype() const { return opts_.kv_dtype; }
  // Bytes the KV state holds now (the whole capacity, once the first step ran; every rank's
  // with tensor parallelism): the CPU executor's caches in kv_dtype, or the oracle's f64 cells.
  int64_t state_bytes() const;
  void reset();
  // Moves to position `pos` without computing anything: the cache rows before it keep
  // whatever they hold. For benchmarks that need a context depth, not its content (a
  // step's cost does not depend on the values it reads).
  Status seek(int64_t pos);

 private:
  struct StepInput {
    models::StepSpec spec;
    exec::SlotValues slots;
  };
  Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts, std::unique_ptr<ModelRunner> runner);
  models::StepSpec spec_for(int64_t n_tokens) const;
  Result<StepInput> input(const std::vector<int32_t>& tokens) const;  // checked tokens, their slots

  const models::Model& model_;
  int64_t capacity_;
  GeneratorOptions opts_;
  std::unique_ptr<ModelRunner> runner_;  // a StepRunner, or a ParallelGroup of them
  int64_t pos_ = 0;
};

}  // namespace kvf::llm
