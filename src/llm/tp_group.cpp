#include "llm/tp_group.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "exec/row_argmax.h"
#include "models/tensor_parallel.h"

namespace kvf::llm {

Result<std::unique_ptr<TpGroup>> TpGroup::open(const models::Model& model, int size, RunnerOptions opts) {
  if (size < 1) return invalid_input("tensor parallel: a group of ", size, " ranks");
  if (opts.decode_attention != nullptr) {
    return unsupported("tensor parallel: a decode-attention backend serves one runner, not a group's ranks at once");
  }
  std::unique_ptr<TpGroup> g(new TpGroup(size));
  const int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
  for (int r = 0; r < size; ++r) {
    const models::TpRank rank{r, size};
    Result<models::ModelConfig> config = models::tp_config(model.config, rank);
    if (!config) return config.take_error();
    Result<models::Weights> weights = models::tp_weights(model.config, model.weights, rank);
    if (!weights) return weights.take_error();
    auto m = std::make_unique<models::Model>();
    m->config = std::move(*config);
    m->weights = std::move(*weights);
    m->trace = model.trace;
    m->source = str_cat(model.source, " (tensor-parallel rank ", r, " of ", size, ")");
    RunnerOptions ro = opts;
    ro.group = &g->group_.rank(r);
    ro.threads = std::max(1, threads / size);
    g->runners_.push_back(std::make_unique<StepRunner>(*m, ro));
    g->ranks_.push_back(std::move(m));
  }
  g->logits_.resize(static_cast<size_t>(size));
  return g;
}

Result<std::span<const float>> TpGroup::run(const models::StepSpec& spec, const exec::SlotValues& slots) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> status(static_cast<size_t>(size()));
  auto step = [&](int r) {
    Result<std::span<const float>> out = runners_[static_cast<size_t>(r)]->run(spec, slots);
    if (!out) {
      group_.rank(r).abort();  // the others' all-reduces fail instead of waiting for this rank
      status[static_cast<size_t>(r)] = out.take_error();
      return;
    }
    logits_[static_cast<size_t>(r)] = *out;
  };
  group_.run(step);
  run_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int failed = group_.aborted_by();
  for (Status& s : status) (void)s.ok();  // each rank's; the first to leave speaks for the step
  if (failed < 0) return logits_[0];
  group_.restart();
  return status[static_cast<size_t>(failed)].take_error().context("tensor-parallel rank ", failed);
}

Result<std::span<const int32_t>> TpGroup::run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) {
  Result<std::span<const float>> logits = run(spec, slots);
  if (!logits) return logits.take_error();
  exec::rows_argmax(*logits, ranks_[0]->config.vocab, drawn_);
  return std::span<const int32_t>(drawn_);
}

Result<std::span<const int32_t>> TpGroup::run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                                    const exec::StepDraws& draws) {
  Status s = exec::check_draws(draws, INT64_MAX);  // a refused draw runs no step
  if (!s) return s.take_error();
  Result<std::span<const float>> logits = run(spec, slots);
  if (!logits) return logits.take_error();
  s = exec::draw_rows(*logits, ranks_[0]->config.vocab, draws, drawn_);
  if (!s) return s.take_error();
  return std::span<const int32_t>(drawn_);
}

Status TpGroup::prepare(const models::StepSpec& spec) {
  for (int r = 0; r < size(); ++r) {
    Status s = runners_[static_cast<size_t>(r)]->prepare(spec);
    if (!s) return s.take_error().context("tensor-parallel rank ", r);
  }
  return {};
}

int64_t TpGroup::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& runner : runners_) bytes += runner->state_bytes();
  return bytes;
}

void TpGroup::reset_state() {
  for (const auto& runner : runners_) runner->reset_state();
}

void TpGroup::forget_steps() {
  for (const auto& runner : runners_) runner->forget_steps();
}

}  // namespace kvf::llm
