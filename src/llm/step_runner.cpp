#include "llm/step_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "exec/row_argmax.h"
#if KVF_WITH_CUDA
#include "exec/cuda/step/executor.h"
#endif

namespace kvf::llm {
namespace {

Error oracle_refuses_placement(const exec::AttentionBackend& b) {
  return unsupported("placing attention on ", b.name(), " needs the CPU executor, not the oracle");
}

}  // namespace

Result<plan::Plan> compile_step(const ir::Graph& traced, const plan::DeviceCaps& caps,
                                const std::vector<std::string>& skip, compile::WidenedConstants* widened) {
  std::vector<compile::Pass> passes;
  for (compile::Pass& p : compile::default_passes()) {
    if (std::find(skip.begin(), skip.end(), p.name) == skip.end()) passes.push_back(std::move(p));
  }
  const bool has_kquant = std::any_of(traced.values.begin(), traced.values.end(), [](const ir::Value& v) {
    return v.kind == ir::ValueKind::kConstant && is_kquant(v.type.dtype);
  });
  std::optional<ir::Graph> wide;
  if (caps.target == plan::Target::kCuda && has_kquant) {
    wide = traced;
    compile::WidenedConstants here;
    Status s = compile::widen_kquant_constants(*wide, widened != nullptr ? *widened : here);
    if (!s) return s.take_error();
  }
  Result<compile::Compiled> c = compile::run_passes(wide ? *wide : traced, passes);
  if (!c) return c.take_error();
  return plan::make_plan(std::move(c->graph), caps);
}

StepRunner::StepRunner(const models::Model& model, RunnerOptions opts)
    : model_(model), opts_(std::move(opts)),
      oracle_({.precision = opts_.precision, .threads = opts_.threads > 0 ? opts_.threads : 1, .group = opts_.group}) {}

StepRunner::Key StepRunner::key_of(const models::StepSpec& s) {
  return {s.n_tokens, s.capacity, s.pool_slots, s.rows, s.cached, s.last_logits, s.kv_dtype, s.window, s.sinks, s.lora};
}

int64_t StepRunner::state_bytes() const {
  if (opts_.executor == ExecutorKind::kCpu) return cpu_state_.bytes();
  if (opts_.executor == ExecutorKind::kCuda) return device_state_ ? device_state_->bytes() : 0;
  int64_t n = 0;
  for (const auto& [name, buf] : oracle_state_) n += buf.numel();
  return n * static_cast<int64_t>(sizeof(double));
}

void StepRunner::reset_state() {
  oracle_state_.clear();
  executors_.clear();  // they point into the state
  cpu_state_.clear();
  if (device_state_) device_state_->clear();
}

void StepRunner::note_prepared(std::chrono::steady_clock::time_point since) {
  ++shapes_prepared_;
  prepare_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Result<const ir::Graph*> StepRunner::graph_for(const models::StepSpec& spec) {
  const Key k = key_of(spec);
  auto it = graphs_.find(k);
  if (it != graphs_.end()) return &it->second;
  const auto t0 = std::chrono::steady_clock::now();
  Result<ir::Graph> g = model_.trace_step(spec);
  if (!g) return g.take_error();
  if (opts_.executor == ExecutorKind::kOracle) note_prepared(t0);  // the oracle's shape is its graph
  return &graphs_.emplace(k, std::move(*g)).first->second;
}

Result<plan::DeviceCaps> StepRunner::caps() {
  if (opts_.executor != ExecutorKind::kCuda) {
    if (!pool_) pool_ = std::make_unique<ThreadPool>(opts_.threads);
    return plan::cpu_caps(pool_->size());
  }
#if KVF_WITH_CUDA
  if (!device_) {
    Result<std::unique_ptr<exec::cuda::step::Device>> d = exec::cuda::step::Device::open(opts_.gpu);
    if (!d) return d.take_error();
    device_ = std::move(*d);
    device_state_ = std::make_unique<exec::StateStore>(*device_);
  }
  plan::DeviceCaps caps = static_cast<exec::cuda::step::Device&>(*device_).caps();
  caps.half_compute = caps.half_compute && opts_.compute == Compute::kAuto;
  return caps;
#else
  return unsupported("--device cuda: this kvforge was built without CUDA (configure with nvcc on the PATH)");
#endif
}

Result<std::unique_ptr<exec::Executor>> StepRunner::bind(plan::Plan plan, const models::StepSpec& spec) {
  if (opts_.executor == ExecutorKind::kCuda) {
#if KVF_WITH_CUDA
    if (exec::AttentionBackend* b = opts_.placed_backend()) {
      return unsupported("placing attention on ", b->name(), " needs the CPU executor, not the GPU");
    }
    auto& device = static_cast<exec::cuda::step::Device&>(*device_);
    Result<std::unique_ptr<exec::cuda::step::CudaExecutor>> ex =
        exec::cuda::step::CudaExecutor::create(std::move(plan), *device_state_, device, opts_.group, opts_.kv_block);
    if (!ex) return ex.take_error();
    return std::unique_ptr<exec::Executor>(std::move(*ex));
#else
    return internal_error("no CUDA executor in this build");
#endif
  }
  if (opts_.kv_block > 0) return unsupported("a context-parallel rank of runners needs the CUDA executor");
  exec::AttentionBackend* placed = opts_.attention_for(spec.n_tokens);
  // A batch's step shapes run again and again over the same weights: packing them once pays.
  // One sequence (generate) packs per call: its prefill runs once, and a second copy of its
  // quantized weights would cost more than it saves.
  const auto packing = spec.rows > 1 ? exec::cpu::WeightPacking::kAhead : exec::cpu::WeightPacking::kPerCall;
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex =
      exec::cpu::CpuExecutor::create(std::move(plan), cpu_state_, *pool_, placed, packing, opts_.group);
  if (!ex) return ex.take_error();
  return std::unique_ptr<exec::Executor>(std::move(*ex));
}

Result<exec::Executor*> StepRunner::executor_for(const models::StepSpec& spec) {
#if KVF_WITH_CUDA
  if (device_) {  // a tensor-parallel rank steps on a thread of its group, not the one that opened the GPU
    Status current = static_cast<exec::cuda::step::Device&>(*device_).make_current();
    if (!current) return current.take_error();
  }
#endif
  const Key k = key_of(spec);
  auto it = executors_.find(k);
  if (it != executors_.end()) return it->second.get();
  const auto t0 = std::chrono::steady_clock::now();
  Result<plan::DeviceCaps> dc = caps();
  if (!dc) return dc.take_error();
  Result<const ir::Graph*> g = graph_for(spec);
  if (!g) return g.take_error();
  Result<plan::Plan> p = compile_step(**g, *dc, opts_.skip_passes, &widened_);
  if (!p) return p.take_error();
  Result<std::unique_ptr<exec::Executor>> ex = bind(std::move(*p), spec);
  if (!ex) return ex.take_error();
  note_prepared(t0);
  return executors_.emplace(k, std::move(*ex)).first->second.get();
}

Result<std::span<const float>> StepRunner::run_oracle(const ir::Graph& g, const exec::SlotValues& slots) {
  Status s = eval::allocate_state(g, oracle_state_);
  if (!s) return s.take_error();
  eval::SlotBindings bind;
  for (const auto& [slot, words] : slots) {
    const ir::ValueId id = g.find_slot(slot);
    if (id < 0) continue;
    Result<eval::Buffer> b = eval::Buffer::i32(g.type(id).shape, words);
    if (!b) return b.take_error().context(g.name, ": slot ", ir::slot_name(slot));
    bind.emplace(slot, std::move(*b));
  }
  Result<eval::Outputs> out = oracle_.run(g, bind, oracle_state_);
  if (!out) return out.take_error();
  const eval::Buffer& logits = out->at("logits");
  oracle_logits_.assign(logits.data.begin(), logits.data.end());
  return std::span<const float>(oracle_logits_);
}

Status StepRunner::prepare(const models::StepSpec& spec) {
  if (opts_.executor == ExecutorKind::kOracle) {
    if (exec::AttentionBackend* b = opts_.placed_backend()) return oracle_refuses_placement(*b);
    Result<const ir::Graph*> g = graph_for(spec);
    return g ? Status() : Status(g.take_error());
  }
  Result<exec::Executor*> ex = executor_for(spec);
  return ex ? Status() : Status(ex.take_error());
}

Result<std::span<const float>> StepRunner::run(const models::StepSpec& spec, const exec::SlotValues& slots) {
  if (opts_.executor == ExecutorKind::kOracle) {
    if (exec::AttentionBackend* b = opts_.placed_backend()) return oracle_refuses_placement(*b);
    Result<const ir::Graph*> g = graph_for(spec);
    if (!g) return g.take_error();
    return run_oracle(**g, slots);
  }
  Result<exec::Executor*> ex = executor_for(spec);
  if (!ex) return ex.take_error();
  Status s = timed([&] { return (*ex)->run(slots); });
  if (!s) return s.take_error();
  return (*ex)->output("logits");
}

Result<std::span<const int32_t>> StepRunner::run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) {
  const int64_t vocab = model_.config.vocab;
  if (opts_.executor != ExecutorKind::kOracle) {
    Result<exec::Executor*> ex = executor_for(spec);
    if (!ex) return ex.take_error();
    return timed([&] { return (*ex)->run_argmax(slots, "logits", vocab); });
  }
  Result<std::span<const float>> logits = run(spec, slots);
  if (!logits) return logits.take_error();
  exec::rows_argmax(*logits, vocab, oracle_ids_);
  return std::span<const int32_t>(oracle_ids_);
}

Result<std::span<const int32_t>> StepRunner::run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                                       const exec::StepDraws& draws) {
  const int64_t vocab = model_.config.vocab;
  if (opts_.executor != ExecutorKind::kOracle) {
    Result<exec::Executor*> ex = executor_for(spec);
    if (!ex) return ex.take_error();
    return timed([&] { return (*ex)->run_sample(slots, "logits", vocab, draws); });
  }
  Status s = exec::check_draws(draws, INT64_MAX);
  Result<std::span<const float>> logits = s ? run(spec, slots) : Result<std::span<const float>>(s.take_error());
  if (!logits) return logits.take_error();
  s = exec::draw_rows(*logits, vocab, draws, oracle_ids_);
  if (!s) return s.take_error();
  return std::span<const int32_t>(oracle_ids_);
}

}  // namespace kvf::llm
