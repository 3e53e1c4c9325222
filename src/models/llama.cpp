// Llama tracer: reads top to bottom like llama2.c's forward — embed, layers, norm, logits.
// Qwen2 (q/k/v biases) and Qwen3 (q/k head norms) differ only by those config flags.
#include "models/llama.h"

#include <cmath>

#include "models/moe.h"

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Result<ir::Graph> trace_llama(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = check_step(cfg, step);
  if (!ok) return ok.take_error();
  const int64_t dim = cfg.dim, hd = cfg.head_dim, nh = cfg.n_heads, nkv = cfg.n_kv_heads;
  StepTrace t(cfg, step);
  ir::Builder& b = t.b;
  const V pos = t.pos;
  const ops::RopeTables rope = ops::rope_tables(pos, cfg.rope_spec());
  const StepMasks masks = step_masks(cfg, step, t);
  const ops::AttnOpts attn{.scale = 1.0 / std::sqrt(static_cast<double>(hd)), .softcap = 0.0};

  V x = embed_tokens(t, cfg, w);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int li = static_cast<int>(l);
    auto W = [&](const char* name, Shape shape) { return weight(b, w, str_cat("blk.", l, ".", name), shape); };
    // attention
    V h = b.name(ops::rmsnorm(x, W("attn_norm.weight", {dim}), cfg.norm_eps), "attn_norm", li);
    auto project = [&](const char* name, int64_t heads) {
      V bias = cfg.attn_bias ? W(str_cat(name, ".bias").c_str(), {heads * hd}) : V{};
      return split_heads(ops::linear(h, W(str_cat(name, ".weight").c_str(), {heads * hd, dim}), bias), heads, hd);
    };
    V q = project("attn_q", nh);
    V k = project("attn_k", nkv);
    V v = project("attn_v", nkv);
    if (cfg.qk_norm) {  // qwen3: per-head RMSNorm over head_dim, before rope
      q = ops::rmsnorm(q, W("attn_q_norm.weight", {hd}), cfg.norm_eps);
      k = ops::rmsnorm(k, W("attn_k_norm.weight", {hd}), cfg.norm_eps);
    }
    q = ops::apply_rope(q, rope);
    k = ops::apply_rope(k, rope);
    const V mask = masks.of(cfg, l);
    V att = layer_attention(step, l, q, k, v, pos, mask, attn);
    // On a tensor-parallel rank o and down hold the columns of its heads and units: the
    // products are partial, summed over the ranks before the residual add.
    x = b.name(x + tp_sum(cfg, ops::linear(merge_heads(att), W("attn_output.weight", {dim, nh * hd}))), "attn_out", li);
    // feed-forward: SwiGLU
    V f = b.name(ops::rmsnorm(x, W("ffn_norm.weight", {dim}), cfg.norm_eps), "ffn_norm", li);
    if (cfg.routed(l)) {
      x = b.name(x + moe_ffn(cfg, w, str_cat("blk.", l, "."), f), "ffn_out", li);
      continue;
    }
    V gate = ops::linear(f, W("ffn_gate.weight", {cfg.hidden_dim, dim}));
    V up = ops::linear(f, W("ffn_up.weight", {cfg.hidden_dim, dim}));
    V down = ops::linear(ops::swiglu(gate, up), W("ffn_down.weight", {dim, cfg.hidden_dim}));
    x = b.name(x + tp_sum(cfg, down), "ffn_out", li);
  }
  V out = ops::rmsnorm(classifier_rows(step, x), weight(b, w, "output_norm.weight", {dim}), cfg.norm_eps);
  const char* classifier = cfg.tie_embeddings ? "token_embd.weight" : "output.weight";
  V logits = vocab_logits(b, cfg, w, classifier, out);
  return finish_logits(t, cfg, logits);
}

}  // namespace kvf::models
