// What every model family provides, and the pieces their tracers share. A family is a
// config reader, a weight-name map and a tracer over ops::; the registry (registry.h)
// maps GGUF general.architecture / HF model_type to one.
#pragma once

#include <string>

#include "ir/builder.h"
#include "ir/graph.h"
#include "models/model_config.h"
#include "models/weights.h"

namespace kvf::models {

class LoraSet;  // models/lora_trace.h

// The shape of one traced step.
struct StepSpec {
  int64_t n_tokens = 1;   // new tokens this step (prefill: the prompt; decode: 1)
  int64_t capacity = 0;   // KV cache positions (cached steps)
  bool cached = true;     // false: a full forward over these tokens alone, no state
  bool last_logits = false;  // true: logits of the last token only, [1, vocab] (prefill for generation)
  DType kv_dtype = DType::kF32;  // what the K/V caches store: f32, or f16 (half the bytes a decode reads)
  // > 0: a paged step. `rows` sequences of n_tokens tokens each (a shorter one repeats its
  // last token; the copies write nothing), their K/V in per-layer pools of pool_slots rows
  // [pool_slots, Hkv, D], read through the read map [rows, capacity] and written through
  // the write map [rows * n_tokens] (llm/kv builds both). capacity is then the longest
  // logical length a row can reach in this step.
  int64_t pool_slots = 0;
  int64_t rows = 1;
  // > 0: a StreamingLLM policy over every layer: a query sees the last `window` positions
  // and the first `sinks` (a sliding layer also keeps its own window).
  int64_t window = 0;
  int64_t sinks = 0;
  // Non-null and not empty: every projection an adapter targets adds its LoRA term, per
  // token through the step's kAdapter slot (models/lora_trace.h).
  const LoraSet* lora = nullptr;
};
inline bool paged(const StepSpec& step) { return step.pool_slots > 0; }
// Tokens the step computes, every row's laid end to end: row-wise work (embeddings, norms,
// projections, MLPs) sees one sequence of them; only attention splits it into rows.
inline int64_t step_tokens(const StepSpec& step) { return step.rows * step.n_tokens; }

// The final hidden rows the classifier reads: all n, or only the last with last_logits.
ir::V classifier_rows(const StepSpec& step, ir::V x);  // x [1, n, dim]

// Every tracer starts here: the config is valid, the step has tokens and its cache holds them.
Status check_step(const ModelConfig& cfg, const StepSpec& step);
// Keys each query row sees: the cache capacity, or the step's own tokens in a full pass.
inline int64_t keys_seen(const StepSpec& step) { return step.cached ? step.capacity : step.n_tokens; }
// A builder named after the arch and step ("llama.step1", "gpt2.full48") and its slots.
struct StepTrace {
  ir::Builder b;
  ir::V tokens, pos;  // i32 [rows * n] each
  // The position of every key column, i32 [R, keys_seen]: 0.. shared by every query (R = 1),
  // or a paged step's Slot::kKeyPos per row (R = rows; its read map may skip freed blocks).
  ir::V keys;
  ir::V read, write;  // paged steps: the read map i32 [rows, capacity] and the write map [rows * n]
  ir::V adapter;      // with step.lora: each token's adapter, i32 [rows * n]
  StepTrace(const ModelConfig& cfg, const StepSpec& step);
};

// Every tracer's first value: the step's tokens looked up in token_embd.weight, [1, n, dim].
// On a tensor-parallel rank (cfg.tp_size > 1) the table holds the rank's vocabulary rows
// (tp_vocab_rows): an id outside them gives zeros, and the sum over the ranks is the one
// rank's row. An id outside the vocabulary then fails the step's validation on every rank.
ir::V embed_tokens(StepTrace& t, const ModelConfig& cfg, const Weights& w);
// The sum of every rank's partial value (all_reduce) on a tensor-parallel rank; else x.
ir::V tp_sum(const ModelConfig& cfg, ir::V x);
// The logits [1, n, vocab] of rows x [1, n, dim] through the classifier table `name`. On a
// tensor-parallel rank the table holds its vocabulary rows: their logits are placed at their
// offset in a row of zeros and summed over the ranks (exact: the other ranks add zeros).
ir::V vocab_logits(ir::Builder& b, const ModelConfig& cfg, const Weights& w, const std::string& name, ir::V x);
// Every tracer's last: logits [rows, vocab] as the step's output "logits", and the graph.
Result<ir::Graph> finish_logits(StepTrace& t, const ModelConfig& cfg, ir::V logits);

// The additive masks a step's layers use, [R, 1, n, keys_seen]: causal (plus the step's
// StreamingLLM policy) for full layers, and with the model's window for sliding ones.
struct StepMasks {
  ir::V full, sliding;
  ir::V of(const ModelConfig& cfg, int64_t layer) const { return cfg.sliding(layer) ? sliding : full; }
};
StepMasks step_masks(const ModelConfig& cfg, const StepSpec& step, const StepTrace& t);

// A weight as an f32 value: the named constant, cast from f16/bf16/q8_0/q4_0 when stored so
// (executors fuse the cast into the consuming matmul). A missing or misshapen tensor is
// recorded as the builder's error.
ir::V weight(ir::Builder& b, const Weights& w, const std::string& name, const Shape& shape);

// One layer's attention: over this step's own keys (a full pass), or by writing k/v
// [1, Hkv, n, D] into the layer's state caches k_cache.L / v_cache.L [1, Hkv, capacity, D]
// and attending over them (attention_masked).
ir::V layer_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V k, ir::V v, ir::V pos, ir::V mask,
                      const ir::ops::AttnOpts& opts);

// MLA's latent form of a cached step (docs/kv.md): c [1, 1, n, r] and k_rot [1, 1, n, rot]
// are written into the layer's kv_latent.L / k_rot.L [1, 1, capacity, ·] (paged: the pools
// kv_latent_pool.L / k_rot_pool.L [pool_slots, 1, ·]), and q [1, H, n, r + rot] attends
// over key [c | k_rot] and value c (ops::attention_latent). Returns [1, H, n, r].
ir::V latent_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V c, ir::V k_rot, ir::V pos, ir::V mask,
                       const ir::ops::AttnOpts& opts);

// A pre-LayerNorm block with fused, biased q|k|v and a tanh-GELU MLP (GPT-2, BLOOM):
// x + attn(ln(x)), then + mlp(ln(.)). Weights blk.L.{attn_norm, attn_qkv, attn_output,
// ffn_norm, ffn_up, ffn_down}.{weight,bias}.
ir::V layernorm_block(const ModelConfig& cfg, const Weights& w, const StepSpec& step, int64_t layer, ir::V x,
                      ir::V pos, ir::V mask);

// [1, n, heads * hd] -> [1, heads, n, hd] and back.
ir::V split_heads(ir::V x, int64_t heads, int64_t head_dim);
ir::V merge_heads(ir::V x);

}  // namespace kvf::models
