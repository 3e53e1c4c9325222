// Gemma 2 and 3 tracer: reads top to bottom — scaled embed, sandwich-normed layers, capped
// logits. Gemma 3 adds q/k norms and a rope base of its own for the sliding layers.
#include "models/gemma2.h"

#include <cmath>

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Result<ir::Graph> trace_gemma2(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = check_step(cfg, step);
  if (!ok) return ok.take_error();
  const int64_t dim = cfg.dim, hd = cfg.head_dim, nh = cfg.n_heads, nkv = cfg.n_kv_heads;
  StepTrace t(cfg, step);
  ir::Builder& b = t.b;
  const V pos = t.pos;
  const ops::RopeTables global = ops::rope_tables(pos, cfg.rope_spec());
  const ops::RopeTables local = cfg.rope_theta_local > 0 ? ops::rope_tables(pos, cfg.rope_spec_local(), "rope_inv_freq_local") : global;
  const StepMasks masks = step_masks(cfg, step, t);
  const double scale = cfg.attn_scale > 0 ? cfg.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
  const ops::AttnOpts attn{.scale = scale, .softcap = cfg.attn_softcap};
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, name, shape); };
  auto norm = [&](V x, const std::string& name) {
    return ops::rmsnorm(x, W(name, {dim}), cfg.norm_eps, cfg.norm_unit_offset);
  };

  V x = embed_tokens(t, cfg, w);
  if (cfg.embed_scale > 0) x = x * static_cast<double>(static_cast<float>(cfg.embed_scale));  // HF casts it to the dtype
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int li = static_cast<int>(l);
    const std::string p = str_cat("blk.", l, ".");
    V h = norm(x, p + "attn_norm.weight");
    V q = split_heads(ops::linear(h, W(p + "attn_q.weight", {nh * hd, dim})), nh, hd);
    V k = split_heads(ops::linear(h, W(p + "attn_k.weight", {nkv * hd, dim})), nkv, hd);
    if (cfg.qk_norm) {  // gemma3: per-head RMSNorm (1 + w) over head_dim, before rope
      q = ops::rmsnorm(q, W(p + "attn_q_norm.weight", {hd}), cfg.norm_eps, cfg.norm_unit_offset);
      k = ops::rmsnorm(k, W(p + "attn_k_norm.weight", {hd}), cfg.norm_eps, cfg.norm_unit_offset);
    }
    const ops::RopeTables& rope = cfg.sliding(l) ? local : global;
    q = ops::apply_rope(q, rope);
    k = ops::apply_rope(k, rope);
    V v = split_heads(ops::linear(h, W(p + "attn_v.weight", {nkv * hd, dim})), nkv, hd);
    const V mask = masks.of(cfg, l);
    V att = layer_attention(step, l, q, k, v, pos, mask, attn);
    V o = ops::linear(merge_heads(att), W(p + "attn_output.weight", {dim, nh * hd}));
    x = b.name(x + norm(o, p + "post_attention_norm.weight"), "attn_out", li);
    V f = norm(x, p + "ffn_norm.weight");
    V gate = ops::linear(f, W(p + "ffn_gate.weight", {cfg.hidden_dim, dim}));
    V up = ops::linear(f, W(p + "ffn_up.weight", {cfg.hidden_dim, dim}));
    V down = ops::linear(ops::geglu(gate, up, cfg.gelu_tanh), W(p + "ffn_down.weight", {dim, cfg.hidden_dim}));
    x = b.name(x + norm(down, p + "post_ffw_norm.weight"), "ffn_out", li);
  }
  V out = norm(classifier_rows(step, x), "output_norm.weight");
  V logits = ops::linear(out, W("token_embd.weight", {cfg.vocab, dim}));
  if (cfg.final_softcap > 0) logits = ops::softcap(logits, cfg.final_softcap);
  return finish_logits(t, cfg, logits);
}

}  // namespace kvf::models
