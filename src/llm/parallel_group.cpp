#include "llm/parallel_group.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "exec/row_argmax.h"
#include "llm/kv/block_pool.h"
#include "models/tensor_parallel.h"
#if KVF_WITH_CUDA
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/nccl_group.h"
#endif

namespace kvf::llm {

namespace {

Status check_group(const char* what, int size, const RunnerOptions& opts) {
  if (size < 1) return invalid_input(what, ": a group of ", size, " ranks");
  if (opts.decode_attention != nullptr || opts.prefill_attention != nullptr) {
    return unsupported(what, ": an attention backend serves one runner, not a group's ranks at once");
  }
  return {};
}

}  // namespace

// Rank r's runner options: its handle on the group, its GPU, its share of the threads.
RunnerOptions ParallelGroup::rank_options(const RunnerOptions& opts, int r) {
  const int threads = opts.threads > 0 ? opts.threads : static_cast<int>(std::thread::hardware_concurrency());
  RunnerOptions ro = opts;
  ro.group = &sums().rank(r);
  ro.gpu = gpus_ ? r : 0;
  ro.threads = std::max(1, threads / size());
  return ro;
}

Result<std::unique_ptr<ParallelGroup>> ParallelGroup::tensor_parallel(const models::Model& model, int size,
                                                                      RunnerOptions opts) {
  if (Status s = check_group("tensor parallel", size, opts); !s) return s.take_error();
  std::unique_ptr<ParallelGroup> g(new ParallelGroup(size, model.config.vocab));
  Status gpus = g->open_gpus(opts);
  if (!gpus) return gpus.take_error();
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
    g->runners_.push_back(std::make_unique<StepRunner>(*m, g->rank_options(opts, r)));
    g->ranks_.push_back(std::move(m));
  }
  g->logits_.resize(static_cast<size_t>(size));
  return g;
}

Result<std::unique_ptr<ParallelGroup>> ParallelGroup::context_parallel(const models::Model& model, int size,
                                                                       RunnerOptions opts) {
  if (Status s = check_group("context parallel", size, opts); !s) return s.take_error();
  if (opts.executor != ExecutorKind::kCuda) {
    return unsupported("context parallel over a group of runners needs the CUDA executor (on the CPU it is an "
                       "attention backend, exec/context_parallel.h)");
  }
  if (opts.group != nullptr) return unsupported("context parallel: a runner of a tensor-parallel group");
  std::unique_ptr<ParallelGroup> g(new ParallelGroup(size, model.config.vocab));
  Status gpus = g->open_gpus(opts);
  if (!gpus) return gpus.take_error();
  for (int r = 0; r < size; ++r) {
    RunnerOptions ro = g->rank_options(opts, r);
    ro.kv_block = kv::kBlockTokens;
    g->runners_.push_back(std::make_unique<StepRunner>(model, ro));
  }
  g->logits_.resize(static_cast<size_t>(size));
  return g;
}

Result<std::unique_ptr<ParallelGroup>> ParallelGroup::open(const models::Model& model, int tp, int cp,
                                                           RunnerOptions opts, const char* user) {
  if (tp > 1 && cp > 1) return unsupported(user, ": ", tp, " tensor-parallel and ", cp, " context-parallel ranks at once");
  return cp > 1 ? context_parallel(model, cp, std::move(opts)) : tensor_parallel(model, tp, std::move(opts));
}

ParallelGroup::~ParallelGroup() = default;

// Several GPUs: rank r on GPU r, summing over NCCL. One GPU (or none: each rank's first step
// says so): every rank on GPU 0, summing through the host.
Status ParallelGroup::open_gpus(const RunnerOptions& opts) {
  if (opts.executor != ExecutorKind::kCuda || size() == 1) return {};
#if KVF_WITH_CUDA
  Result<int> visible = exec::cuda::step::Device::count();
  if (!visible || *visible <= 1) return {};
  Result<std::unique_ptr<exec::cuda::step::NcclGroup>> nccl = exec::cuda::step::NcclGroup::open(size());
  if (!nccl) return nccl.take_error().context("a group of ", size(), " ranks over ", *visible, " GPUs");
  gpus_ = std::move(*nccl);
#endif
  return {};
}

Result<std::span<const float>> ParallelGroup::run(const models::StepSpec& spec, const exec::SlotValues& slots) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> status(static_cast<size_t>(size()));
  auto step = [&](int r) {
    Result<std::span<const float>> out = runners_[static_cast<size_t>(r)]->run(spec, slots);
    if (!out) {
      sums().rank(r).abort();  // the others' collectives fail instead of waiting for this rank
      status[static_cast<size_t>(r)] = out.take_error();
      return;
    }
    logits_[static_cast<size_t>(r)] = *out;
  };
  group_.run(step);
  run_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int failed = sums().aborted_by();
  for (Status& s : status) (void)s.ok();  // each rank's; the first to leave speaks for the step
  if (failed < 0) return logits_[0];
  Error e = status[static_cast<size_t>(failed)].take_error().context("rank ", failed, " of ", size());
  if (Status again = sums().restart(); !again) return again.take_error().context("after ", e.to_string());
  return e;
}

Result<std::span<const int32_t>> ParallelGroup::run_argmax(const models::StepSpec& spec, const exec::SlotValues& slots) {
  Result<std::span<const float>> logits = run(spec, slots);
  if (!logits) return logits.take_error();
  exec::rows_argmax(*logits, vocab_, drawn_);
  return std::span<const int32_t>(drawn_);
}

Result<std::span<const int32_t>> ParallelGroup::run_sample(const models::StepSpec& spec, const exec::SlotValues& slots,
                                                    const exec::StepDraws& draws) {
  Status s = exec::check_draws(draws, INT64_MAX);  // a refused draw runs no step
  if (!s) return s.take_error();
  Result<std::span<const float>> logits = run(spec, slots);
  if (!logits) return logits.take_error();
  s = exec::draw_rows(*logits, vocab_, draws, drawn_);
  if (!s) return s.take_error();
  return std::span<const int32_t>(drawn_);
}

Status ParallelGroup::prepare(const models::StepSpec& spec) {
  for (int r = 0; r < size(); ++r) {
    Status s = runners_[static_cast<size_t>(r)]->prepare(spec);
    if (!s) return s.take_error().context("rank ", r, " of ", size());
  }
  return {};
}

int64_t ParallelGroup::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& runner : runners_) bytes += runner->state_bytes();
  return bytes;
}

void ParallelGroup::reset_state() {
  for (const auto& runner : runners_) runner->reset_state();
}

void ParallelGroup::forget_steps() {
  for (const auto& runner : runners_) runner->forget_steps();
}

}  // namespace kvf::llm
