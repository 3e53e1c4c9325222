// Gemma 2: sqrt(dim) embedding scale, (1 + w) RMSNorms before and after both sub-blocks,
// attention and final-logit softcaps, query_pre_attn_scalar, alternating sliding and full
// layers, GeGLU (tanh) MLP, tied head.
#pragma once

#include "models/family.h"

namespace kvf::models {

// Weights (GGUF gemma2 names): token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v,
// attn_output, post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm}
// .weight, output_norm.weight. cfg.norm_unit_offset says whether norms add 1 to w.
Result<ir::Graph> trace_gemma2(const ModelConfig& cfg, const Weights& w, const StepSpec& step);

}  // namespace kvf::models
