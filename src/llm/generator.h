// Generator: runs a Model's steps over a fixed-capacity contiguous KV cache, on the oracle
// for now (the fast executors arrive with exec/). Prefill and decode are the same call: a
// step over n new tokens at the next positions. Graphs are traced once per step length.
#pragma once

#include <map>
#include <vector>

#include "eval/oracle.h"
#include "models/model.h"

namespace kvf::llm {

class Generator {
 public:
  // capacity <= 0 means the model's context length.
  Generator(const models::Model& model, int64_t capacity, eval::EvalOptions opts = {});

  // Runs `tokens` at positions position()..; returns the logits of every new position,
  // row-major [tokens.size(), vocab]. Refuses (kCapacity) a step past the cache.
  Result<std::vector<float>> step(const std::vector<int32_t>& tokens);

  int64_t position() const { return pos_; }
  int64_t capacity() const { return capacity_; }
  int64_t vocab() const { return model_.config.vocab; }
  // Elements the KV state holds now (the whole capacity, once the first step ran).
  int64_t state_elements() const;
  void reset();

 private:
  Result<const ir::Graph*> graph_for(int64_t n_tokens);

  const models::Model& model_;
  int64_t capacity_;
  eval::Oracle oracle_;
  eval::StateStore state_;
  std::map<int64_t, ir::Graph> graphs_;  // by step length
  int64_t pos_ = 0;
};

}  // namespace kvf::llm
