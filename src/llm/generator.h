// Generator: runs a Model's steps over a fixed-capacity contiguous KV cache. By default each
// step length is traced once, compiled (compile/), planned for this CPU (plan/) and bound
// to the CPU executor, which replays it per call; ExecutorKind::kOracle keeps the oracle.
// Prefill and decode are the same call: a step over n new tokens at the next positions.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "eval/oracle.h"
#include "exec/cpu/executor.h"
#include "exec/state.h"
#include "models/model.h"

namespace kvf::llm {

enum class ExecutorKind { kCpu, kOracle };

struct GeneratorOptions {
  ExecutorKind executor = ExecutorKind::kCpu;
  eval::Precision precision = eval::Precision::kNative;  // oracle only
  int threads = 0;  // 0: one per hardware thread
  bool last_logits = false;  // step() returns the last position's logits only (generation)
  DType kv_dtype = DType::kF32;  // the KV cache's element type: f32, or f16 (half the bytes)
  std::vector<std::string> skip_passes;  // compiler passes left out (benchmarks: "attention")
};

// The traced step graph compiled by the default passes (less `skip`) and planned for `caps`.
Result<plan::Plan> compile_step(const ir::Graph& traced, const plan::DeviceCaps& caps,
                                const std::vector<std::string>& skip = {});

class Generator {
 public:
  // capacity <= 0 means the model's context length.
  Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts = {});

  // Runs `tokens` at positions position()..; returns the logits of every new position,
  // row-major [tokens.size(), vocab] (of the last one only with last_logits).
  // Refuses (kCapacity) a step past the cache.
  Result<std::vector<float>> step(const std::vector<int32_t>& tokens);

  int64_t position() const { return pos_; }
  int64_t capacity() const { return capacity_; }
  int64_t vocab() const { return model_.config.vocab; }
  ExecutorKind executor() const { return opts_.executor; }
  DType kv_dtype() const { return opts_.kv_dtype; }
  // Bytes the KV state holds now (the whole capacity, once the first step ran): the CPU
  // executor's caches in kv_dtype, or the oracle's f64 cells.
  int64_t state_bytes() const;
  void reset();
  // Moves to position `pos` without computing anything: the cache rows before it keep
  // whatever they hold. For benchmarks that need a context depth, not its content (a
  // step's cost does not depend on the values it reads).
  Status seek(int64_t pos);

 private:
  Result<const ir::Graph*> graph_for(int64_t n_tokens);
  Result<exec::cpu::CpuExecutor*> executor_for(int64_t n_tokens);
  Result<std::vector<float>> run_oracle(const ir::Graph& g, const std::vector<int32_t>& tokens,
                                        const std::vector<int32_t>& pos);

  const models::Model& model_;
  int64_t capacity_;
  GeneratorOptions opts_;
  eval::Oracle oracle_;
  eval::StateStore oracle_state_;
  std::unique_ptr<ThreadPool> pool_;
  exec::StateStore cpu_state_;
  std::map<int64_t, ir::Graph> graphs_;  // by step length
  std::map<int64_t, std::unique_ptr<exec::cpu::CpuExecutor>> executors_;
  int64_t pos_ = 0;
};

}  // namespace kvf::llm
