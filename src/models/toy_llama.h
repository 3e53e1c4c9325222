// A llama-shaped toy transformer with seeded random weights, traced into a Graph.
// It exists for the demo, the cached-decode tests and benchmarks until real checkpoints
// load; the real families (models/<family>.cpp) follow the same tracer shape.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/ops.h"

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
  int64_t kv_dim() const { return n_kv_heads * head_dim(); }
  Status check() const;
};

struct ToyLayerWeights {
  HostTensor attn_norm;  // [dim]
  HostTensor wq;         // [dim, dim]
  HostTensor wk;         // [kv_dim, dim]
  HostTensor wv;         // [kv_dim, dim]
  HostTensor wo;         // [dim, dim]
  HostTensor ffn_norm;   // [dim]
  HostTensor w_gate;     // [hidden_dim, dim]
  HostTensor w_up;       // [hidden_dim, dim]
  HostTensor w_down;     // [dim, hidden_dim]
};

struct ToyLlamaWeights {
  HostTensor tok_emb;  // [vocab, dim]
  std::vector<ToyLayerWeights> layers;
  HostTensor final_norm;  // [dim]
  HostTensor output;      // [vocab, dim]
};

// Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights and norms near 1, from one seed.
Result<ToyLlamaWeights> random_toy_weights(const ToyLlamaConfig& cfg, uint64_t seed);

enum class ToyMode {
  kCached,  // writes K/V into state caches [1, Hkv, max_seq, hd] at pos; attends over the cache
  kFull,    // no state: attends over this step's own keys (a full forward from position 0)
};

// Traces one step over n_tokens new tokens. Slots: token i32[n], pos i32[n].
// Output "logits" [n, vocab]. In kCached mode the caches are named k_cache.L / v_cache.L.
Result<ir::Graph> trace_toy_llama(const ToyLlamaConfig& cfg, const ToyLlamaWeights& w, int64_t n_tokens,
                                  ToyMode mode);

// Bytes the K and V caches of cfg hold for `tokens` positions at `bytes_per_elem`:
// 2 · layers · n_kv · d_head · tokens · bytes (the seed's memory bill, batch 1).
int64_t kv_cache_bytes(const ToyLlamaConfig& cfg, int64_t tokens, int64_t bytes_per_elem);

}  // namespace kvf::models
