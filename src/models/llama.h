// The llama family (Llama 2/3, TinyLlama, SmolLM, llama2.c models) and its close kin that
// differ only by config flags: mistral (sliding window), qwen2 (q/k/v biases), qwen3 (q/k
// head norms). RMSNorm, rope, GQA attention, SwiGLU.
#pragma once

#include "models/family.h"

namespace kvf::models {

// Slots: token i32[n], pos i32[n]. Output "logits" [n, vocab]. Cached steps read and write
// state k_cache.L / v_cache.L [1, n_kv_heads, capacity, head_dim].
Result<ir::Graph> trace_llama(const ModelConfig& cfg, const Weights& w, const StepSpec& step);

}  // namespace kvf::models
