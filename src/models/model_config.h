// ModelConfig: the immutable description of a transformer that every family's tracer
// reads. Filled from a checkpoint's metadata (GGUF, config.json, llama2.c header) by the
// family's loader; checked once before tracing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "ir/ops.h"

namespace kvf::models {

struct ModelConfig {
  std::string arch = "llama";  // the family: a key of models/registry.h
  int64_t vocab = 0;
  int64_t dim = 0;         // hidden size
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;    // usually dim / n_heads
  int64_t hidden_dim = 0;  // feed-forward width
  int64_t context = 2048;  // longest sequence the model was built for
  double norm_eps = 1e-5;

  double rope_theta = 10000.0;
  double rope_theta_local = 0.0;  // the sliding layers' own rope base (gemma3); 0: rope_theta
  int64_t rotary_dim = 0;  // 0: the whole head
  ir::ops::RopeLayout rope_layout = ir::ops::RopeLayout::kHalf;
  std::vector<float> rope_inv_freq;  // set when a scaling rule (llama3, ...) rewrote them

  int64_t sliding_window = 0;       // > 0: layers marked sliding attend to this many keys
  std::vector<bool> layer_sliding;  // per layer; empty means every layer when window > 0
  bool tie_embeddings = false;      // classifier shares token_embd.weight
  bool attn_bias = false;           // q/k/v projections carry biases (qwen2)
  bool qk_norm = false;             // RMSNorm over each q/k head before rope (qwen3)

  // gemma2
  bool norm_unit_offset = false;    // RMSNorm scales by (1 + w) (HF gemma; GGUF stores 1 + w already)
  double embed_scale = 0.0;         // > 0: embeddings are multiplied by it (gemma: sqrt(dim))
  double attn_scale = 0.0;          // > 0: overrides 1/sqrt(head_dim) (gemma: query_pre_attn_scalar^-0.5)
  double attn_softcap = 0.0;        // > 0: cap * tanh(score / cap) before the mask
  double final_softcap = 0.0;       // > 0: the same on the logits

  // deepseek2 (multi-head latent attention)
  int64_t q_lora_rank = 0;          // 0: q is one projection
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_dim = 0;          // per-head key part without rope
  int64_t qk_rope_dim = 0;          // rotary part, shared by every head
  int64_t v_head_dim = 0;
  // deepseek_v32's sparse-attention indexer (models/sparse_indexer.h): each query attends to
  // the index_topk keys its indexer of index_heads heads of index_head_dim scores best.
  int64_t index_topk = 0;           // 0: no indexer, dense attention
  int64_t index_heads = 0;
  int64_t index_head_dim = 0;

  // Mixture of experts (models/moe.h): the layers marked in expert_layers route each token
  // to n_experts_used of n_experts gated units; the others keep a dense MLP.
  int64_t n_experts = 0;            // routed experts per MoE layer
  int64_t n_experts_used = 0;       // experts each token takes (top-k)
  int64_t n_shared_experts = 0;     // always-on experts, as one gated unit of n · expert_hidden_dim
  int64_t shared_expert_hidden_dim = 0;  // that unit's width when it is not n · expert_hidden_dim
  bool shared_expert_gated = false;      // the shared unit times sigmoid(x · ffn_gate_inp_shexp) (Qwen2-MoE)
  // DeepSeek-V3's routing: sigmoid scores, a per-expert bias (exp_probs_b) added to them for
  // the choice alone, and the choice made within the expert_groups_used best of
  // expert_groups groups of experts (a group's score: the sum of its two best).
  bool expert_sigmoid = false;
  int64_t expert_groups = 1, expert_groups_used = 1;
  int64_t expert_hidden_dim = 0;    // each expert's feed-forward width
  std::vector<bool> expert_layers;  // per layer, when n_experts > 0
  bool expert_weights_norm = false; // the top-k weights renormalized to sum to 1
  double expert_weights_scale = 1.0;

  // GELU flavour where a family uses GELU (gpt2, bloom, gemma2's GeGLU): HF "gelu_new" and
  // "gelu_pytorch_tanh" are the tanh form, "gelu" the exact erf form.
  bool gelu_tanh = true;

  // A learned table of absolute positions (gpt2): no position at or past `context` exists.
  // Set from the family's registry row when the model is opened.
  bool learned_positions = false;

  int32_t bos = -1, eos = -1;

  // Tensor parallelism (models/tensor_parallel.h): this config is rank tp_rank of tp_size,
  // as tp_config makes it; the tracer then sums the split products over the group
  // (all_reduce). 1: the whole model.
  int tp_rank = 0;
  int tp_size = 1;

  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool routed(int64_t layer) const {
    return n_experts > 0 && layer >= 0 && layer < static_cast<int64_t>(expert_layers.size()) && expert_layers[static_cast<size_t>(layer)];
  }
  bool sliding(int64_t layer) const;
  Status check() const;
  Status check_experts() const;
  ir::ops::RopeSpec rope_spec() const;
  ir::ops::RopeSpec rope_spec_local() const;  // the sliding layers' (rope_theta_local > 0), unscaled
};

// MLA configs (kv_lora_rank > 0) cache the latent, not per-head K/V (docs/kv.md).
inline bool latent_kv(const ModelConfig& cfg) { return cfg.kv_lora_rank > 0; }
inline bool sparse_indexer(const ModelConfig& cfg) { return cfg.index_topk > 0; }
// Elements one token adds to one layer's cache: 2 · n_kv · d_head for K/V, or the latent
// kv_lora_rank + qk_rope_dim (c and the shared rotary key, each stored once); plus
// index_head_dim with a sparse-attention indexer (its key).
int64_t kv_elems_per_token_layer(const ModelConfig& cfg);
// The KV memory bill (seed 003): layers · kv_elems_per_token_layer · tokens · bytes per
// element, what the caches of `tokens` positions hold: 2 · layers · n_kv · d_head · tokens ·
// bytes, or for MLA layers · (kv_lora_rank + qk_rope_dim [+ index_head_dim]) · tokens · bytes.
int64_t kv_bill_bytes(const ModelConfig& cfg, int64_t tokens, int64_t bytes_per_elem);

}  // namespace kvf::models
