// Scheduler: continuous batching over a Driver. Each step spends a token budget: first on
// the running sequences, oldest first (a decode costs 1 token, a prefill a chunk of what
// is left of its prompt), then on admitting waiting requests (a prefix-cache hit skips its
// share of the prefill). Unless told to mix them, a step runs either prefill chunks
// (admissions included) or decodes, alternating when both wait. When the pool runs out, the newest running sequence is preempted
// by recompute: its blocks go back and it waits at the head of the queue with its tokens
// and sampler, to be re-admitted later as one longer prompt, producing the same tokens it
// would have. No admission happens in a step that preempted (it would take back the room).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "llm/driver.h"

namespace kvf::llm {

struct Request {
  std::string id;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplerConfig sampler;
  int32_t adapter = 0;  // the LoRA adapter it runs with (DriverOptions::lora, 1-based; 0: none)
};

struct Completion {
  std::string id;
  std::vector<int32_t> ids;  // generated
  std::string stop;          // "length" or "eos"
  double ttft_ms = 0;        // from submission to the first generated token
  double tokens_per_s = 0;   // generated tokens over the time from first token to last
  int64_t prefix_hit_tokens = 0;  // at first admission
  int preemptions = 0;
};

struct SchedulerOptions {
  int64_t max_batch_tokens = 256;  // tokens computed per step, decodes and prefill chunks together
  int max_rows = 32;               // sequences per step
  // A step is [rows, t]: every row is padded to the longest row's tokens, so one prefill
  // chunk among decodes makes each decode row compute t tokens. Unmixed (the default), a
  // step holds either prefill chunks or decodes; when both wait, the two alternate.
  bool mix_prefill_and_decode = false;
  // Called in step() for every sampled token, in row order, before the step's completions
  // are returned (a server streams from it).
  std::function<void(const std::string& id, const RowResult& row)> on_token;
};

// The steps whose rows were all decodes of running requests and whose shape had run
// before (a step that met a new shape also traced and compiled it): the steady decode rate,
// what llama-batched-bench's S_TG measures. A step's seconds are all of step(): picking its
// rows, running them, committing, and releasing the requests that finished.
struct DecodeStats {
  int64_t steps = 0, tokens = 0;
  double seconds = 0;
  double executor_seconds = 0;  // of `seconds`, inside the executor's runs (StepRunner::run_seconds)
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; }
};

class Scheduler {
 public:
  Scheduler(Driver& driver, SchedulerOptions opts);

  void submit(Request r);
  // One step: picks rows, runs them, commits; returns the requests that finished in it.
  // kCapacity when the head request cannot fit even in an empty pool.
  Result<std::vector<Completion>> step();
  bool idle() const { return waiting_.empty() && running_.empty(); }
  // Drops a request, waiting or running (its blocks go back to the pool); false when no
  // request has that id.
  Result<bool> cancel(const std::string& id);
  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  // Steps until idle; completions in the order they finished.
  Result<std::vector<Completion>> run();

  int64_t steps() const { return steps_; }
  int64_t preemptions() const { return preemptions_; }
  const DecodeStats& steady_decode() const { return steady_decode_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Tracked {
    Request req;
    std::optional<Suspended> suspended;  // set while waiting after a preemption
    Clock::time_point submitted, first_token, last_token;
    bool has_first = false;
    int64_t prefix_hit_tokens = -1;  // -1: never admitted
    int preemptions = 0;
    SeqId seq = -1;
  };

  Result<bool> admit(Tracked& t);
  Status preempt_newest(std::vector<RowRequest>& rows);
  Result<bool> place(Tracked& t, int64_t& budget, std::vector<RowRequest>& rows, bool& preempted);
  enum class Phase { kAny, kPrefill, kDecode };
  bool in_phase(const Tracked& t, Phase phase) const;
  Status pick_rows(Phase phase, std::vector<RowRequest>& rows, bool& preempted);
  Completion complete(Tracked& t);
  Tracked& running(SeqId seq);
  bool all_decodes(const std::vector<RowRequest>& rows);

  Driver& driver_;
  SchedulerOptions opts_;
  std::deque<Tracked> waiting_;
  std::vector<Tracked> running_;  // admission order: the back is the newest
  int64_t steps_ = 0, preemptions_ = 0;
  DecodeStats steady_decode_;
  bool last_was_prefill_ = false;
};

}  // namespace kvf::llm
