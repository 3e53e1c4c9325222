// A llama-shaped toy transformer with seeded random weights, for the demo, the
// cached-decode tests and benchmarks. It is the llama family (models/llama.cpp) with
// synthetic weights: nothing here traces on its own.
#pragma once

#include <cstdint>

#include "models/family.h"

namespace kvf::models {

struct ToyLlamaConfig {
  int64_t vocab = 512;
  int64_t dim = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 8;
  int64_t n_kv_heads = 2;
  int64_t hidden_dim = 688;
  int64_t max_seq = 128;  // KV cache capacity
  int64_t window = 0;     // 0: full causal attention; else a sliding window of this many keys
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  ir::ops::RopeLayout rope_layout = ir::ops::RopeLayout::kHalf;

  int64_t head_dim() const { return dim / n_heads; }
  Status check() const;
  ModelConfig model_config() const;
};

using ToyLlamaWeights = Weights;

// Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) matrices and norms near 1, from one seed,
// under the llama family's tensor names.
Result<Weights> random_toy_weights(const ToyLlamaConfig& cfg, uint64_t seed);

enum class ToyMode {
  kCached,  // writes K/V into state caches [1, Hkv, max_seq, hd] at pos; attends over the cache
  kFull,    // no state: attends over this step's own keys (a full forward from position 0)
};

Result<ir::Graph> trace_toy_llama(const ToyLlamaConfig& cfg, const Weights& w, int64_t n_tokens, ToyMode mode);


}  // namespace kvf::models
