// The reference every batching test compares with: one request alone on a contiguous cache,
// sampled by its own Sampler, on the executor `kind`.
#pragma once

#include <vector>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "llm/scheduler.h"
#include "testing.h"

namespace kvf::testing {

inline std::vector<int32_t> solo(const models::Model& m, const llm::Request& r, int64_t cap,
                                 llm::ExecutorKind kind = llm::ExecutorKind::kCpu) {
  llm::GeneratorOptions o;
  o.last_logits = true;
  o.threads = 2;
  o.executor = kind;
  llm::Generator gen(m, cap, o);
  llm::Sampler sampler(r.sampler);
  std::vector<int32_t> history = r.prompt, out, in = r.prompt;
  while (static_cast<int64_t>(out.size()) < r.max_tokens) {
    const std::vector<float> logits = must(gen.step(in));
    const int32_t next = sampler.sample(logits, history);
    out.push_back(next);
    history.push_back(next);
    in = {next};
  }
  return out;
}

}  // namespace kvf::testing
