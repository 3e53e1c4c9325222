// DeepSeek-V2 tracer: latent K/V, split rotary key, Dv != Dk attention.
#include "models/deepseek2.h"

#include <cmath>
#include <optional>

#include "models/moe.h"
#include "models/sparse_indexer.h"

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

namespace {

// One layer's attention inputs: q_nope [1, H, n, nope], roped q_rot [1, H, n, rot], the
// normed latent c [1, n, r], roped k_rot [1, 1, n, rot] and attn_kv_b [H * (nope + dv), r]
// (per head: nope rows W_uk, then dv rows W_uv).
struct MlaHeads {
  V q_nope, q_rot, latent, k_rot, kv_b;
};

// The full forward, as transformers computes it: c decompressed into per-head nope keys and
// values, every head's key [k_nope | k_rot] with k_rot broadcast (compile/ splits it off
// again). Nothing is cached here.
V decompressed_attention(const MlaHeads& m, V mask, const ops::AttnOpts& attn) {
  ir::Builder& b = *m.latent.b;
  if (!m.q_nope.valid() || !m.kv_b.valid()) return m.q_nope.valid() ? m.kv_b : m.q_nope;  // a failed trace: stay poisoned
  const int64_t nh = m.q_nope.dim(1), n = m.q_nope.dim(2), nope = m.q_nope.dim(3), rot = m.k_rot.dim(3);
  const int64_t dv = m.kv_b.dim(0) / nh - nope;
  V kv = split_heads(ops::linear(m.latent, m.kv_b), nh, nope + dv);
  V k_nope = b.slice_axis(kv, -1, 0, nope);
  V v = b.slice_axis(kv, -1, nope, nope + dv);
  V query = b.concat({m.q_nope, m.q_rot}, -1);
  V key = b.concat({k_nope, b.broadcast(m.k_rot, {1, nh, n, rot})}, -1);
  return ops::attention_prefill(query, key, v, mask, attn);
}

// A cached step in the absorbed form (DeepSeek-V2 §2.1.2, docs/kv.md): W_uk moves into the
// query and W_uv after the attention, so the cache holds only c and k_rot, r + rot elements
// per token, and attention is MQA over one latent head:
//   q_lat[h] = q_nope[h] · W_uk[h]              [1, H, n, r]
//   o_lat[h] = attn([q_lat | q_rot], key [c | k_rot], value c)
//   out[h]   = o_lat[h] · W_uv[h]ᵀ               [1, H, n, dv]
// Scores are q_nope·(W_uk c) + q_rot·k_rot as before, only summed in another order; the
// weight slices depend on constants alone, so executors fold them once.
V absorbed_attention(const StepSpec& step, int64_t layer, const MlaHeads& m, V pos, V mask, const ops::AttnOpts& attn) {
  ir::Builder& b = *m.latent.b;
  const int64_t nh = m.q_nope.dim(1), n = m.q_nope.dim(2), nope = m.q_nope.dim(3), r = m.latent.dim(2);
  const int64_t dv = m.kv_b.dim(0) / nh - nope;
  V w = b.reshape(m.kv_b, {1, nh, nope + dv, r});
  V w_uk = b.slice_axis(w, 2, 0, nope);                                          // [1, H, nope, r]
  V w_uv_t = b.transpose(b.slice_axis(w, 2, nope, nope + dv), {0, 1, 3, 2});     // [1, H, r, dv]
  V q_lat = b.matmul(m.q_nope, w_uk);
  V query = b.concat({q_lat, m.q_rot}, -1);
  V c = b.reshape(m.latent, {1, 1, n, r});
  V o_lat = latent_attention(step, layer, query, c, m.k_rot, pos, mask, attn);
  return b.matmul(o_lat, w_uv_t);
}

}  // namespace

Result<ir::Graph> trace_deepseek2(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = check_step(cfg, step);
  if (!ok) return ok.take_error();
  if (cfg.kv_lora_rank <= 0 || cfg.qk_rope_dim <= 0 || cfg.qk_nope_dim <= 0 || cfg.v_head_dim <= 0) {
    return invalid_input("deepseek2: kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim must be positive");
  }
  if (sparse_indexer(cfg) && step.window > 0) {
    return unsupported(cfg.arch, ": a StreamingLLM window over the sparse-attention indexer's selection");
  }
  const int64_t n = step_tokens(step), dim = cfg.dim, nh = cfg.n_heads;
  const int64_t nope = cfg.qk_nope_dim, rot = cfg.qk_rope_dim, dk = nope + rot, dv = cfg.v_head_dim, r = cfg.kv_lora_rank;
  StepTrace t(cfg, step);
  ir::Builder& b = t.b;
  const V pos = t.pos;
  ops::RopeSpec rope_spec = cfg.rope_spec();
  rope_spec.head_dim = rot;  // rope turns only the shared rotary part
  rope_spec.rotary_dim = 0;
  const ops::RopeTables rope = ops::rope_tables(pos, rope_spec);
  const V mask = step_masks(cfg, step, t).full;
  const double scale = cfg.attn_scale > 0 ? cfg.attn_scale : 1.0 / std::sqrt(static_cast<double>(dk));
  const ops::AttnOpts attn{.scale = scale, .softcap = 0.0};
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, name, shape); };
  std::optional<SparseIndexer> indexer;
  if (sparse_indexer(cfg)) indexer.emplace(cfg, w, step, t);

  V x = embed_tokens(t, cfg, w);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int li = static_cast<int>(l);
    const std::string p = str_cat("blk.", l, ".");
    V h = b.name(ops::rmsnorm(x, W(p + "attn_norm.weight", {dim}), cfg.norm_eps), "attn_norm", li);
    // queries: [1, H, n, nope | rot]
    V q_flat, q_a_norm;
    if (cfg.q_lora_rank > 0) {  // compressed queries: down-project, RMSNorm, up-project
      V q_a = ops::linear(h, W(p + "attn_q_a.weight", {cfg.q_lora_rank, dim}));
      q_a_norm = ops::rmsnorm(q_a, W(p + "attn_q_a_norm.weight", {cfg.q_lora_rank}), cfg.norm_eps);
      q_flat = ops::linear(q_a_norm, W(p + "attn_q_b.weight", {nh * dk, cfg.q_lora_rank}));
    } else {
      q_flat = ops::linear(h, W(p + "attn_q.weight", {nh * dk, dim}));
    }
    V q = split_heads(q_flat, nh, dk);
    V q_nope = b.slice_axis(q, -1, 0, nope);
    V q_rot = ops::apply_rope(b.slice_axis(q, -1, nope, dk), rope);
    // the latent [1, n, r | rot]: RMS-normed c and the shared rotary key
    V kv_a = ops::linear(h, W(p + "attn_kv_a_mqa.weight", {r + rot, dim}));
    V latent = ops::rmsnorm(b.slice_axis(kv_a, -1, 0, r), W(p + "attn_kv_a_norm.weight", {r}), cfg.norm_eps);
    V k_rot = ops::apply_rope(b.reshape(b.slice_axis(kv_a, -1, r, r + rot), {1, 1, n, rot}), rope);
    V kv_b = W(p + "attn_kv_b.weight", {nh * (nope + dv), r});
    const MlaHeads heads{q_nope, q_rot, latent, k_rot, kv_b};
    const V layer_mask = indexer ? mask + indexer->mask(l, h, q_a_norm) : mask;  // the indexer's keys alone
    V att = step.cached ? absorbed_attention(step, l, heads, pos, layer_mask, attn)
                        : decompressed_attention(heads, layer_mask, attn);
    x = b.name(x + ops::linear(merge_heads(att), W(p + "attn_output.weight", {dim, nh * dv})), "attn_out", li);
    V f = b.name(ops::rmsnorm(x, W(p + "ffn_norm.weight", {dim}), cfg.norm_eps), "ffn_norm", li);
    if (cfg.routed(l)) {
      x = b.name(x + moe_ffn(cfg, w, p, f), "ffn_out", li);
      continue;
    }
    V gate = ops::linear(f, W(p + "ffn_gate.weight", {cfg.hidden_dim, dim}));
    V up = ops::linear(f, W(p + "ffn_up.weight", {cfg.hidden_dim, dim}));
    x = b.name(x + ops::linear(ops::swiglu(gate, up), W(p + "ffn_down.weight", {dim, cfg.hidden_dim})), "ffn_out", li);
  }
  V out = ops::rmsnorm(classifier_rows(step, x), W("output_norm.weight", {dim}), cfg.norm_eps);
  const char* classifier = cfg.tie_embeddings ? "token_embd.weight" : "output.weight";
  V logits = ops::linear(out, W(classifier, {cfg.vocab, dim}));
  return finish_logits(t, cfg, logits);
}

}  // namespace kvf::models
