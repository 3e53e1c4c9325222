// DeepSeek-V2 attention (multi-head latent attention): q projection, a shared low-rank
// key/value latent (kv_lora_rank) expanded per head, a rotary key part shared by every
// head, value width independent of the key width; queries direct or through a q_lora_rank
// bottleneck. Dense SwiGLU MLPs, and routed-MoE layers (models/moe.h) from
// first_k_dense_replace on; with index_topk (DeepSeek-V3.2) a sparse-attention indexer per
// layer picks the keys each query attends to (models/sparse_indexer.h). Cached steps keep
// only the latent: per token and layer the normed c (kv_lora_rank) and the roped k_rot
// (qk_rope_head_dim), attended in the absorbed form (family.h latent_attention, docs/kv.md);
// the full forward decompresses c into per-head keys and values as transformers does.
#pragma once

#include "models/family.h"

namespace kvf::models {

// Weights (GGUF deepseek2 names): token_embd, blk.N.{attn_norm, attn_q (or attn_q_a,
// attn_q_a_norm, attn_q_b with q_lora_rank), attn_kv_a_mqa,
// attn_kv_a_norm, attn_kv_b, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.weight,
// output_norm.weight, output.weight; the indexer's blk.N.indexer.{attn_q_b, attn_k, proj,
// k_norm}.weight and k_norm.bias.
Result<ir::Graph> trace_deepseek2(const ModelConfig& cfg, const Weights& w, const StepSpec& step);

}  // namespace kvf::models
