#include "serve/engine.h"

#include <algorithm>
#include <cstdio>

namespace kvf::serve {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::vector<JobEvent> Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<JobEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void Job::push(JobEvent e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

Engine::Engine(const models::Model& model, EngineOptions opts, Metrics& metrics)
    : model_(model), opts_(std::move(opts)), metrics_(metrics) {
  opts_.scheduler.on_token = [this](const std::string& id, const llm::RowResult& row) { on_token(id, row); };
  lora_ = opts_.lora;
  opts_.driver.lora = lora_.get();
  for (size_t i = 0; lora_ && i < lora_->adapters().size(); ++i) lora_serial_ = std::max(lora_serial_, lora_->adapters()[i]->serial);
  driver_ = std::make_unique<llm::Driver>(model_, opts_.driver);
  sched_ = std::make_unique<llm::Scheduler>(*driver_, opts_.scheduler);
  opts_.driver.max_seq_len = driver_->max_seq_len();
  warm_up_ = driver_->opened();  // a refused group of ranks runs no step: warm_up says so
  if (warm_up_ && opts_.warm_up) warm_up_ = driver_->warm_up(opts_.scheduler.max_rows, opts_.scheduler.max_batch_tokens);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& [id, c] : choices_) c.job->push({c.index, std::nullopt, std::nullopt, true, "cancelled", "", 0});
  for (Pending& p : pending_) p.choice.job->push({p.choice.index, std::nullopt, std::nullopt, true, "cancelled", "", 0});
}

Result<std::shared_ptr<Job>> Engine::submit(JobSpec spec) {
  const auto np = static_cast<int64_t>(spec.prompt.size());
  if (np == 0) return invalid_input("the prompt has no tokens");
  for (int32_t t : spec.prompt) {
    if (t < 0 || t >= model_.config.vocab) return invalid_input("token id ", t, " is outside the vocabulary of ", model_.config.vocab);
  }
  if (np + spec.max_tokens > max_seq_len()) {
    return invalid_input("this model's context is ", max_seq_len(), " tokens; the prompt has ", np, " and max_tokens asks for ",
                         spec.max_tokens);
  }
  auto job = std::make_shared<Job>(spec.n);
  std::lock_guard lock(mu_);
  if (draining_ || stopping_) return capacity("the server is shutting down");
  int32_t adapter = 0;
  if (!spec.lora.empty()) {
    Result<int32_t> id = models::lora_id(latest_lora(), spec.lora);
    if (!id) return id.take_error();
    adapter = *id;
  }
  const size_t room = opts_.max_waiting + static_cast<size_t>(opts_.scheduler.max_rows);
  if (queued_ + static_cast<size_t>(spec.n) > room) return capacity("the queue is full (", queued_, " sequences)");
  job->id_ = str_cat("job", next_job_++);
  const Clock::time_point now = Clock::now();
  for (int i = 0; i < spec.n; ++i) {
    llm::Request r{str_cat(job->id_, "/", i), spec.prompt, spec.max_tokens, spec.sampler, adapter};
    r.sampler.seed = spec.seeded ? spec.sampler.seed + static_cast<uint64_t>(i) : seeds_();
    pending_.push_back({r.id, Choice{job, i, now, now, 0, adapter != 0}, std::move(r)});
  }
  queued_ += static_cast<size_t>(spec.n);
  if (adapter != 0) adapted_ += static_cast<size_t>(spec.n);
  metrics_.add_prompt_tokens(np * spec.n);
  cv_.notify_all();
  return job;
}

const models::LoraSet* Engine::latest_lora() const { return lora_next_ ? lora_next_.get() : lora_.get(); }

std::vector<std::shared_ptr<const models::LoraAdapter>> Engine::adapters() const {
  std::lock_guard lock(mu_);
  const models::LoraSet* set = latest_lora();
  return set != nullptr ? set->adapters() : std::vector<std::shared_ptr<const models::LoraAdapter>>{};
}

// Under mu_.
Status Engine::swap_lora(std::shared_ptr<const models::LoraSet> next) {
  if (draining_ || stopping_) return capacity("the server is shutting down");
  if (adapted_ > 0) return capacity(adapted_, " sequences run or wait with an adapter; change the adapters once they end");
  lora_next_ = std::move(next);
  cv_.notify_all();
  return {};
}

Status Engine::put_lora(models::LoraAdapter adapter) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
  if (const models::LoraSet* set = latest_lora()) adapters = set->adapters();
  adapter.serial = ++lora_serial_;
  auto loaded = std::make_shared<const models::LoraAdapter>(std::move(adapter));
  auto same = std::find_if(adapters.begin(), adapters.end(), [&](const auto& a) { return a->name == loaded->name; });
  if (same != adapters.end()) *same = loaded;
  else adapters.push_back(loaded);
  return swap_lora(std::make_shared<const models::LoraSet>(std::move(adapters)));
}

Status Engine::remove_lora(const std::string& name) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
  if (const models::LoraSet* set = latest_lora()) adapters = set->adapters();
  auto it = std::find_if(adapters.begin(), adapters.end(), [&](const auto& a) { return a->name == name; });
  if (it == adapters.end()) return models::lora_id(latest_lora(), name).take_error();
  adapters.erase(it);
  return swap_lora(std::make_shared<const models::LoraSet>(std::move(adapters)));
}

void Engine::cancel(const Job& job, int choice) {
  {
    std::lock_guard lock(mu_);
    for (int i = 0; i < job.n(); ++i) {
      if (choice < 0 || choice == i) cancels_.push_back(str_cat(job.id_, "/", i));
    }
  }
  cv_.notify_all();
}

void Engine::drain() {
  std::unique_lock lock(mu_);
  draining_ = true;
  idle_cv_.wait(lock, [&] { return queued_ == 0 || stopping_; });
}

int64_t Engine::used_blocks() const {
  std::lock_guard lock(mu_);
  return used_blocks_;
}

// Under mu_: new choices join the scheduler's queue.
void Engine::admit_pending() {
  for (Pending& p : pending_) {
    sched_->submit(std::move(p.request));
    choices_.emplace(p.id, std::move(p.choice));
  }
  pending_.clear();
}

// Under mu_: cancelled choices leave the scheduler (and give their blocks back) now.
void Engine::apply_cancels() {
  for (const std::string& id : cancels_) {
    if (!choices_.count(id)) continue;  // already ended
    Result<bool> r = sched_->cancel(id);
    if (!r) {
      fail_all(r.take_error());
      return;
    }
    end_choice(id, "cancelled", 0);
  }
  cancels_.clear();
}

void Engine::on_token(const std::string& id, const llm::RowResult& row) {
  auto it = choices_.find(id);
  if (it == choices_.end()) return;
  Choice& c = it->second;
  const Clock::time_point now = Clock::now();
  if (c.tokens == 0) metrics_.time_to_first_token(seconds(now - c.submitted));
  else metrics_.inter_token_latency(seconds(now - c.last_token));
  c.last_token = now;
  ++c.tokens;
  metrics_.add_generation_tokens(1);
  c.job->push({c.index, row.token, row.logprobs, false, "", "", 0});
}

// Under mu_.
void Engine::end_choice(const std::string& id, const std::string& finish, int64_t cached, const std::string& error) {
  auto it = choices_.find(id);
  if (it == choices_.end()) return;
  Choice& c = it->second;
  metrics_.finished(finish);
  metrics_.e2e_latency(seconds(Clock::now() - c.submitted));
  if (c.adapted) --adapted_;  // before the end is seen: a change right after it is not refused
  c.job->push({c.index, std::nullopt, std::nullopt, true, finish, error, cached});
  choices_.erase(it);
  --queued_;
  if (queued_ == 0) idle_cv_.notify_all();
}

// Under mu_: a step failed (a kvforge bug, not a request's fault). Every choice ends with
// the error, and the engine starts over with an empty pool rather than trust its state.
void Engine::fail_all(const Error& e) {
  std::fprintf(stderr, "kvforge serve: engine step failed: %s\n", e.to_string().c_str());
  std::vector<std::string> ids;
  for (const auto& [id, c] : choices_) ids.push_back(id);
  for (const std::string& id : ids) end_choice(id, "error", 0, e.message());
  sched_.reset();
  driver_ = std::make_unique<llm::Driver>(model_, opts_.driver);
  sched_ = std::make_unique<llm::Scheduler>(*driver_, opts_.scheduler);
}

void Engine::publish_state() {
  const int32_t total = driver_->total_blocks(), used = total - driver_->free_blocks();
  used_blocks_ = used;
  const llm::kv::PrefixCache& pc = driver_->prefix_cache();
  metrics_.set_state(static_cast<int64_t>(sched_->running()), static_cast<int64_t>(sched_->waiting()),
                     total > 0 ? static_cast<double>(used) / total : 0.0, sched_->preemptions(),
                     pc.hit_tokens() + pc.miss_tokens(), pc.hit_tokens());
}

void Engine::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || lora_next_ || !pending_.empty() || !cancels_.empty() || !sched_->idle(); });
    if (stopping_) return;
    if (lora_next_) {  // no sequence runs with an adapter (swap_lora): ids may move
      lora_ = std::move(lora_next_);
      opts_.driver.lora = lora_.get();
      if (Status s = driver_->set_lora(lora_.get()); !s) fail_all(s.error());
    }
    admit_pending();
    apply_cancels();
    if (sched_->idle()) {
      publish_state();
      continue;
    }
    // The step runs without the lock: HTTP threads keep submitting and cancelling.
    lock.unlock();
    Result<std::vector<llm::Completion>> done = sched_->step();
    lock.lock();
    if (!done) {
      fail_all(done.take_error());
    } else {
      for (const llm::Completion& c : *done) end_choice(c.id, c.stop == "eos" ? "stop" : "length", c.prefix_hit_tokens);
    }
    publish_state();
  }
}

}  // namespace kvf::serve
