// BLOOM: ALiBi instead of rope, LayerNorm on the embeddings, fused q/k/v, tanh-GELU MLP.
#pragma once

#include "models/family.h"

namespace kvf::models {

// Weights (GGUF bloom names; q/k/v rows are q | k | v, HF's per-head interleave is undone at
// load): token_embd.weight, token_embd_norm.{weight,bias}, blk.N.{attn_norm, attn_qkv,
// attn_output, ffn_norm, ffn_up, ffn_down}.{weight,bias}, output_norm.{weight,bias}; tied head.
Result<ir::Graph> trace_bloom(const ModelConfig& cfg, const Weights& w, const StepSpec& step);

}  // namespace kvf::models
