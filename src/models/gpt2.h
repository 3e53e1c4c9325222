// GPT-2: learned positions, LayerNorm with biases, fused q/k/v, tanh-GELU MLP, tied head.
#pragma once

#include "models/family.h"

namespace kvf::models {

// Weights (GGUF gpt2 names; HF's Conv1D matrices are transposed to [out, in] at load):
// token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
// ffn_down}.{weight,bias}, output_norm.{weight,bias}; the classifier is token_embd.
Result<ir::Graph> trace_gpt2(const ModelConfig& cfg, const Weights& w, const StepSpec& step);

}  // namespace kvf::models
