// Generator: one contiguous sequence, its position counter, stepped through a StepRunner
// or a ParallelGroup.
#include "llm/generator.h"

#include "llm/parallel_group.h"
#include "models/lora_trace.h"

namespace kvf::llm {
namespace {

RunnerOptions runner_options(const GeneratorOptions& o) {
  RunnerOptions r;
  r.executor = o.executor;
  r.compute = o.compute;
  r.precision = o.precision;
  r.threads = o.threads;
  r.skip_passes = o.skip_passes;
  r.decode_attention = o.decode_attention;
  r.prefill_attention = o.prefill_attention;
  return r;
}

}  // namespace

Generator::Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts)
    : Generator(model, capacity, opts, std::make_unique<StepRunner>(model, runner_options(opts))) {}

Generator::Generator(const models::Model& model, int64_t capacity, GeneratorOptions opts,
                     std::unique_ptr<ModelRunner> runner)
    : model_(model),
      capacity_(capacity > 0 ? capacity : model.config.context),
      opts_(std::move(opts)),
      runner_(std::move(runner)) {}

Result<std::unique_ptr<Generator>> Generator::open(const models::Model& model, int64_t capacity,
                                                   GeneratorOptions opts, int tp_ranks, int cp_ranks) {
  if (tp_ranks == 1 && cp_ranks == 1) return std::make_unique<Generator>(model, capacity, std::move(opts));
  Result<std::unique_ptr<ParallelGroup>> group =
      ParallelGroup::open(model, tp_ranks, cp_ranks, runner_options(opts), "generator");
  if (!group) return group.take_error();
  return std::unique_ptr<Generator>(new Generator(model, capacity, std::move(opts), std::move(*group)));
}

int64_t Generator::state_bytes() const { return runner_->state_bytes(); }

void Generator::reset() {
  runner_->reset_state();
  pos_ = 0;
}

Status Generator::seek(int64_t pos) {
  if (pos < 0 || pos > capacity_) return kvf::capacity("generator: position ", pos, " is outside the cache of ", capacity_);
  pos_ = pos;
  return {};
}

models::StepSpec Generator::spec_for(int64_t n_tokens) const {
  models::StepSpec spec;
  spec.n_tokens = n_tokens;
  spec.capacity = capacity_;
  spec.cached = true;
  spec.last_logits = opts_.last_logits;
  spec.kv_dtype = opts_.kv_dtype;
  spec.window = opts_.window;
  spec.sinks = opts_.sinks;
  spec.lora = opts_.lora != nullptr && !opts_.lora->empty() ? opts_.lora : nullptr;
  return spec;
}

Status Generator::prepare_decode() { return runner_->prepare(spec_for(1)); }

Result<Generator::StepInput> Generator::input(const std::vector<int32_t>& tokens) const {
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
  StepInput in{spec_for(n), {{ir::Slot::kToken, tokens}, {ir::Slot::kPos, pos}}};
  if (in.spec.lora != nullptr) in.slots[ir::Slot::kAdapter] = std::vector<int32_t>(tokens.size(), opts_.adapter);
  return in;
}

Result<std::vector<float>> Generator::step(const std::vector<int32_t>& tokens) {
  Result<StepInput> in = input(tokens);
  if (!in) return in.take_error();
  Result<std::span<const float>> logits = runner_->run(in->spec, in->slots);
  if (!logits) return logits.take_error();
  pos_ += static_cast<int64_t>(tokens.size());
  return std::vector<float>(logits->begin(), logits->end());
}

Result<int32_t> Generator::step_draw(const std::vector<int32_t>& tokens, const exec::StepDraws& draws) {
  if (!opts_.last_logits || draws.rows.size() != 1) {
    return invalid_input("generator: a drawn step needs last_logits and one draw (", draws.rows.size(), " given)");
  }
  Result<StepInput> in = input(tokens);
  if (!in) return in.take_error();
  Result<std::span<const int32_t>> ids = runner_->run_sample(in->spec, in->slots, draws);
  if (!ids) return ids.take_error();
  pos_ += static_cast<int64_t>(tokens.size());
  return (*ids)[0];
}

}  // namespace kvf::llm
