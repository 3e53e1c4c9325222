// Sampler: turns a logits row into the next token. Greedy when temperature is 0; else
// repetition penalty, temperature, top-k, top-p and min-p filtering, then a seeded draw.
// The RNG state lives here, never in a global (llama2.c's lesson).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace kvf::llm {

struct SamplerConfig {
  double temperature = 0.0;  // 0: greedy (argmax)
  int top_k = 0;             // 0: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off; keep tokens with p >= min_p * p_max
  double repeat_penalty = 1.0;  // 1: off; divides positive logits, multiplies negative ones
  int repeat_last_n = 64;       // how much history the penalty looks at
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig cfg) : cfg_(cfg), rng_(cfg.seed) {}
  // history: the tokens so far (prompt and generated), for the repetition penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplerConfig cfg_;
  std::mt19937_64 rng_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace kvf::llm
