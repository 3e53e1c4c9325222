// Sampler: turns a logits row into the next token. Greedy when temperature is 0; else
// logit bias, penalties, temperature, top-k, top-p and min-p filtering, then a seeded draw.
// The RNG state lives here, never in a global (llama2.c's lesson). Log-probabilities for
// a response (OpenAI `logprobs`) come from the raw logits, before any of that (token_logprobs).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "exec/row_argmax.h"
#include "exec/row_draw.h"

namespace kvf::llm {

struct SamplerConfig {
  double temperature = 0.0;  // 0: greedy (argmax)
  int top_k = 0;             // 0: off
  double top_p = 1.0;        // 1: off
  double min_p = 0.0;        // 0: off; keep tokens with p >= min_p * p_max
  double repeat_penalty = 1.0;  // 1: off; divides positive logits, multiplies negative ones
  int repeat_last_n = 64;       // how much history the penalty looks at
  // OpenAI's penalties over the generated tokens only: logit -= presence·[count > 0] + frequency·count.
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits first, greedy included
  int logprobs = -1;  // -1: off; else the sampled token's log-probability and the top `logprobs` ones
  uint64_t seed = 0;
};

// A sampled token's log-probability under the raw logits, and the most likely tokens'.
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
};

// log_softmax(logits)[token] and the `top` best entries (ties: lower id first).
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

class Sampler {
 public:
  explicit Sampler(SamplerConfig cfg) : cfg_(std::move(cfg)), rng_(cfg_.seed) {}
  // history: the tokens so far; its first n_prompt are the prompt (the repetition penalty
  // looks at all of them, the presence and frequency penalties only at the rest).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, size_t n_prompt);
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history) {
    return sample(logits, history, history.size());
  }
  // The same row drawn where its logits are (exec::RowDraw; a GPU): its edits (bias,
  // penalties) appended to `edits`, and one uniform from this sampler's RNG when it samples.
  // A different walk than sample()'s, so a different token for the same seed; as
  // deterministic.
  exec::RowDraw device_draw(std::span<const int32_t> history, size_t n_prompt, size_t vocab,
                            std::vector<exec::LogitEdit>& edits);
  const SamplerConfig& config() const { return cfg_; }

  // The token is the logits' row_argmax and nothing else of them is read (no logprobs).
  bool plain_greedy() const { return cfg_.temperature <= 0 && !adjusts() && cfg_.logprobs < 0; }
  // Whether a penalty reads the history (else any history, even none, gives the same token).
  bool reads_history() const {
    return (cfg_.repeat_penalty != 1.0 && cfg_.repeat_last_n > 0) || cfg_.presence_penalty != 0.0 ||
           cfg_.frequency_penalty != 0.0;
  }

 private:
  bool adjusts() const;  // a logit bias or a penalty changes the logits before the draw
  // What the bias and the penalties do to a row of `vocab`: one edit per changed token (a
  // token biased twice takes the sum of its biases), by token.
  std::vector<exec::LogitEdit> logit_edits(std::span<const int32_t> history, size_t n_prompt, size_t vocab) const;

  SamplerConfig cfg_;
  std::mt19937_64 rng_;
};

inline int32_t argmax(std::span<const float> logits) { return exec::row_argmax(logits); }

}  // namespace kvf::llm
