// Generator: slots, graph and executor caches and the position counter.
#include "llm/generator.h"

#include <algorithm>

#include "compile/passes.h"
#include "compile/pipeline.h"

namespace kvf::llm {

Result<plan::Plan> compile_step(const ir::Graph& traced, const plan::DeviceCaps& caps,
                                const std::vector<std::string>& skip) {
  std::vector<compile::Pass> passes;
  for (compile::Pass& p : compile::default_passes()) {
    if (std::find(skip.begin(), skip.end(), p.name) == skip.end()) passes.push_back(std::move(p));
  }
  Result<compile::Compiled> c = compile::run_passes(traced, passes);
  if (!c) return c.take_error();
  return plan::make_plan(std::move(c->graph), caps);
}

Generator::Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts)
    : model_(model),
      capacity_(capacity > 0 ? capacity : model.config.context),
      opts_(opts),
      oracle_({.precision = opts.precision, .threads = opts.threads > 0 ? opts.threads : 1}) {}

int64_t Generator::state_bytes() const {
  if (opts_.executor == ExecutorKind::kCpu) return cpu_state_.bytes();
  int64_t n = 0;
  for (const auto& [name, buf] : oracle_state_) n += buf.numel();
  return n * static_cast<int64_t>(sizeof(double));
}

void Generator::reset() {
  oracle_state_.clear();
  executors_.clear();  // they point into the state
  cpu_state_.clear();
  pos_ = 0;
}

Status Generator::seek(int64_t pos) {
  if (pos < 0 || pos > capacity_) return kvf::capacity("generator: position ", pos, " is outside the cache of ", capacity_);
  pos_ = pos;
  return {};
}

Result<const ir::Graph*> Generator::graph_for(int64_t n_tokens) {
  auto it = graphs_.find(n_tokens);
  if (it != graphs_.end()) return &it->second;
  Result<ir::Graph> g = model_.trace_step(
      {.n_tokens = n_tokens, .capacity = capacity_, .cached = true, .last_logits = opts_.last_logits,
       .kv_dtype = opts_.kv_dtype});
  if (!g) return g.take_error();
  return &graphs_.emplace(n_tokens, std::move(*g)).first->second;
}

Result<exec::cpu::CpuExecutor*> Generator::executor_for(int64_t n_tokens) {
  auto it = executors_.find(n_tokens);
  if (it != executors_.end()) return it->second.get();
  Result<const ir::Graph*> g = graph_for(n_tokens);
  if (!g) return g.take_error();
  if (!pool_) pool_ = std::make_unique<ThreadPool>(opts_.threads);
  Result<plan::Plan> p = compile_step(**g, plan::cpu_caps(pool_->size()), opts_.skip_passes);
  if (!p) return p.take_error();
  Result<std::unique_ptr<exec::cpu::CpuExecutor>> ex = exec::cpu::CpuExecutor::create(std::move(*p), cpu_state_, *pool_);
  if (!ex) return ex.take_error();
  return executors_.emplace(n_tokens, std::move(*ex)).first->second.get();
}

Result<std::vector<float>> Generator::run_oracle(const ir::Graph& g, const std::vector<int32_t>& tokens,
                                                 const std::vector<int32_t>& pos) {
  const auto n = static_cast<int64_t>(tokens.size());
  Status s = eval::allocate_state(g, oracle_state_);
  if (!s) return s.take_error();
  Result<eval::Buffer> tok = eval::Buffer::i32({n}, tokens);
  if (!tok) return tok.take_error();
  Result<eval::Buffer> p = eval::Buffer::i32({n}, pos);
  if (!p) return p.take_error();
  eval::SlotBindings slots{{ir::Slot::kToken, std::move(*tok)}, {ir::Slot::kPos, std::move(*p)}};
  Result<eval::Outputs> out = oracle_.run(g, slots, oracle_state_);
  if (!out) return out.take_error();
  const eval::Buffer& logits = out->at("logits");
  return std::vector<float>(logits.data.begin(), logits.data.end());
}

Result<std::vector<float>> Generator::step(const std::vector<int32_t>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_input("generator: a step needs at least one token");
  if (pos_ + n > capacity_) {
    return kvf::capacity("generator: ", pos_, " cached + ", n, " new tokens exceed the KV cache capacity ", capacity_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= model_.config.vocab) {
      return invalid_input("generator: token id ", t, " is outside the vocabulary of ", model_.config.vocab);
    }
  }
  std::vector<int32_t> pos(tokens.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(pos_ + static_cast<int64_t>(i));
  Result<std::vector<float>> logits = std::vector<float>{};
  if (opts_.executor == ExecutorKind::kOracle) {
    Result<const ir::Graph*> g = graph_for(n);
    if (!g) return g.take_error();
    logits = run_oracle(**g, tokens, pos);
  } else {
    Result<exec::cpu::CpuExecutor*> ex = executor_for(n);
    if (!ex) return ex.take_error();
    Status s = (*ex)->run({{ir::Slot::kToken, tokens}, {ir::Slot::kPos, pos}});
    if (!s) return s.take_error();
    std::span<const float> out = (*ex)->output("logits");
    logits = std::vector<float>(out.begin(), out.end());
  }
  if (!logits) return logits.take_error();
  pos_ += n;
  return logits;
}

}  // namespace kvf::llm
