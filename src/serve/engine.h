// Engine: the one thread that owns a model's Driver and Scheduler and steps them while
// there is work. HTTP threads only submit jobs, cancel them and read their events, so no
// lock is held while a step runs. A job is one request of n choices; each choice is a
// scheduler request of its own, so the n share the prompt's prefix-cache blocks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "llm/driver.h"
#include "llm/scheduler.h"
#include "serve/metrics.h"

namespace kvf::serve {

struct EngineOptions {
  llm::DriverOptions driver;
  llm::SchedulerOptions scheduler;  // on_token is the engine's
  size_t max_waiting = 256;         // choices queued beyond this are refused (kCapacity)
  bool warm_up = false;             // compile the common step shapes before serving (Driver::warm_up)
  std::shared_ptr<const models::LoraSet> lora;  // the LoRA adapters requests may name (null: none)
};

struct JobSpec {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  llm::SamplerConfig sampler;
  bool seeded = false;  // else each choice draws a fresh seed
  int n = 1;
  std::string lora;  // the LoRA adapter by name ("": the base model)
};

// What the engine says about one choice: a token, or its end.
struct JobEvent {
  int choice = 0;
  std::optional<int32_t> token;
  std::optional<llm::TokenLogprobs> logprobs;
  bool end = false;
  std::string finish;          // at the end: "stop" (eos), "length", "cancelled" or "error"
  std::string error;           // for "error"
  int64_t cached_tokens = 0;   // at the end: prompt tokens served by the prefix cache
};

class Job {
 public:
  explicit Job(int n) : n_(n) {}
  int n() const { return n_; }
  // The events that came, waiting up to `timeout` for the first (empty: none yet).
  std::vector<JobEvent> wait(std::chrono::milliseconds timeout);

 private:
  friend class Engine;
  void push(JobEvent e);

  int n_;
  std::string id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
};

class Engine {
 public:
  // With opts.warm_up, returns once the common step shapes are compiled; a failure there
  // (a shape the executor refuses) is reported by warm_up_status().
  Engine(const models::Model& model, EngineOptions opts, Metrics& metrics);
  ~Engine();  // cancels what is left and joins the thread
  // Also a driver whose tensor-parallel ranks cannot open (llm::Driver::opened).
  const Status& warm_up_status() const { return warm_up_; }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // kInvalidInput for a prompt the engine cannot run (empty, a token outside the
  // vocabulary, longer than the context with max_tokens); kCapacity when the queue is
  // full or the engine is draining.
  Result<std::shared_ptr<Job>> submit(JobSpec spec);
  // The choice (every choice for -1) ends "cancelled", if it has not ended, before the
  // next step; its blocks go back to the pool.
  void cancel(const Job& job, int choice = -1);
  // Refuses new jobs and returns once every job has ended.
  void drain();

  int64_t max_seq_len() const { return opts_.driver.max_seq_len; }

  // The LoRA adapters requests may name now, in id order.
  std::vector<std::shared_ptr<const models::LoraAdapter>> adapters() const;
  // Adds an adapter, or replaces the one of its name (a reload: the new load's serial gives
  // it a new prefix-cache identity). The steps take the new set before the next admission.
  // kCapacity while a choice runs or waits with an adapter (ids may move under it).
  Status put_lora(models::LoraAdapter adapter);
  // kInvalidInput when no adapter has that name; kCapacity as for put_lora.
  Status remove_lora(const std::string& name);
  const models::Model& model() const { return model_; }
  // Blocks held by sequences right now (the engine thread's last count).
  int64_t used_blocks() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Choice {
    std::shared_ptr<Job> job;
    int index = 0;
    Clock::time_point submitted, last_token;
    int64_t tokens = 0;
    bool adapted = false;  // runs with a LoRA adapter
  };
  struct Pending {
    std::string id;
    Choice choice;
    llm::Request request;
  };

  void loop();
  void admit_pending();
  void apply_cancels();
  void on_token(const std::string& id, const llm::RowResult& row);
  void end_choice(const std::string& id, const std::string& finish, int64_t cached, const std::string& error = "");
  void fail_all(const Error& e);
  void publish_state();
  const models::LoraSet* latest_lora() const;  // under mu_: the set new jobs resolve names in
  Status swap_lora(std::shared_ptr<const models::LoraSet> next);

  const models::Model& model_;
  EngineOptions opts_;
  Metrics& metrics_;
  std::unique_ptr<llm::Driver> driver_;
  std::unique_ptr<llm::Scheduler> sched_;
  Status warm_up_;
  std::unordered_map<std::string, Choice> choices_;  // the engine thread's

  mutable std::mutex mu_;  // guards what HTTP threads touch: pending_, cancels_, flags, counts
  std::condition_variable cv_, idle_cv_;
  std::deque<Pending> pending_;
  std::vector<std::string> cancels_;
  size_t queued_ = 0;   // choices submitted and not yet ended
  int64_t used_blocks_ = 0;
  uint64_t next_job_ = 0;
  std::mt19937_64 seeds_{std::random_device{}()};  // a choice's seed when the client gave none
  bool stopping_ = false, draining_ = false;
  // LoRA: the set the driver steps with (the engine thread's), and one an HTTP thread put in
  // its place, taken by the engine thread before it admits again; choices with an adapter.
  std::shared_ptr<const models::LoraSet> lora_, lora_next_;
  size_t adapted_ = 0;
  uint64_t lora_serial_ = 0;
  std::thread thread_;
};

}  // namespace kvf::serve
