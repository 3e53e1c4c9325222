// The reference every batching test compares with: one request alone on a contiguous cache,
// sampled by its own Sampler (on a GPU as the device draws: exec/row_draw.h, as the driver
// does there), on the executor `kind` (or as the generator options `o` say); the requests
// those tests batch, and their drivers.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "exec/row_draw.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/sampler.h"
#include "llm/scheduler.h"
#include "testing.h"

namespace kvf::testing {

inline std::vector<int32_t> solo(const models::Model& m, const llm::Request& r, int64_t cap,
                                 const llm::GeneratorOptions& o) {
  const llm::ExecutorKind kind = o.executor;
  llm::Generator gen(m, cap, o);
  llm::Sampler sampler(r.sampler);
  std::vector<int32_t> history = r.prompt, out, in = r.prompt;
  while (static_cast<int64_t>(out.size()) < r.max_tokens) {
    const std::vector<float> logits = must(gen.step(in));
    int32_t next = 0;
    if (kind == llm::ExecutorKind::kCuda) {
      std::vector<exec::LogitEdit> edits;
      const exec::RowDraw d = sampler.device_draw(history, r.prompt.size(), logits.size(), edits);
      next = exec::draw_row(logits, d, edits);
    } else {
      next = sampler.sample(logits, history);
    }
    out.push_back(next);
    history.push_back(next);
    in = {next};
  }
  return out;
}

inline std::vector<int32_t> solo(const models::Model& m, const llm::Request& r, int64_t cap,
                                 llm::ExecutorKind kind = llm::ExecutorKind::kCpu) {
  llm::GeneratorOptions o;
  o.last_logits = true;
  o.threads = 2;
  o.executor = kind;
  return solo(m, r, cap, o);
}

// A test's driver: `blocks` pool blocks, sequences up to max_seq_len, two threads, and the
// weights identity `name` (so prefix hits never cross tests).
inline llm::DriverOptions test_driver(int32_t blocks, int64_t max_seq_len, const std::string& name) {
  llm::DriverOptions o;
  o.pool_blocks = blocks;
  o.max_seq_len = max_seq_len;
  o.threads = 2;
  o.identity = llm::kv::weights_identity(name);
  return o;
}

// Submits every request and runs the scheduler to the end: the completions by id.
inline std::map<std::string, llm::Completion> run_scheduled(llm::Scheduler& sched, const std::vector<llm::Request>& reqs) {
  for (const llm::Request& r : reqs) sched.submit(r);
  std::map<std::string, llm::Completion> got;
  for (const llm::Completion& c : must(sched.run())) got.emplace(c.id, c);
  return got;
}

// Six requests q0..q5 of 10, 15, ..., 35 random prompt tokens and 20 new ones each (up to 55
// tokens); the odd ones sample (seed 77 + i), the even ones are greedy.
inline std::vector<llm::Request> mixed_requests(std::mt19937_64& rng, int64_t vocab) {
  std::vector<llm::Request> reqs;
  for (int i = 0; i < 6; ++i) {
    llm::Request r{str_cat("q", i), random_ids(rng, 10 + 5 * i, vocab), 20, {}};
    if (i % 2) r.sampler = {.temperature = 1.0, .top_k = 0, .top_p = 1.0, .min_p = 0.0, .repeat_penalty = 1.0,
                            .repeat_last_n = 64, .seed = static_cast<uint64_t>(77 + i)};
    reqs.push_back(r);
  }
  return reqs;
}

// Runs `reqs` through a scheduler (64 tokens and 32 rows a step) over a driver of options `o`
// whose pool is too small for all of them, and expects what every such test asks: a
// preemption, each request's ids equal to its run alone on a contiguous cache of `cap`
// positions (on o.executor), and every block back in the pool. The completions by id.
inline std::map<std::string, llm::Completion> expect_paged_equals_solo(const models::Model& m,
                                                                       const std::vector<llm::Request>& reqs,
                                                                       const llm::DriverOptions& o, int64_t cap) {
  llm::Driver driver(m, o);
  llm::Scheduler sched(driver, {.max_batch_tokens = 64, .max_rows = 32});
  const std::map<std::string, llm::Completion> got = run_scheduled(sched, reqs);
  EXPECT_GT(sched.preemptions(), 0);
  for (const llm::Request& r : reqs) {
    EXPECT_EQ(got.at(r.id).ids, solo(m, r, cap, o.executor)) << r.id;
  }
  EXPECT_EQ(driver.free_blocks(), driver.total_blocks());
  return got;
}

}  // namespace kvf::testing
