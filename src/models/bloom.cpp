// BLOOM tracer: embedding LayerNorm, pre-LN blocks with ALiBi attention, tied logits.
#include "models/bloom.h"

#include <cmath>

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Result<ir::Graph> trace_bloom(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = cfg.check();
  if (!ok) return ok.take_error();
  if (step.cached && step.capacity < step.n_tokens) return capacity("bloom: cache smaller than the step");
  const int64_t n = step.n_tokens, dim = cfg.dim, hd = cfg.head_dim, nh = cfg.n_heads;
  const int64_t lk = step.cached ? step.capacity : n;
  ir::Builder b(str_cat("bloom", step.cached ? ".step" : ".full", n));
  V tokens = b.slot(ir::Slot::kToken, DType::kI32, {n});
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  // ALiBi: slope_h * key position; softmax ignores the per-row constant -slope_h * query.
  V alibi = ops::alibi_bias(b, ops::alibi_slopes(nh), lk);
  const V mask = ops::causal_mask(pos, lk) + alibi;  // [1, H, n, lk]
  const ops::AttnOpts attn{.scale = 1.0 / std::sqrt(static_cast<double>(hd)), .softcap = 0.0};
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, name, shape); };
  auto layernorm = [&](V x, const std::string& name) {
    return ops::layernorm(x, W(name + ".weight", {dim}), W(name + ".bias", {dim}), cfg.norm_eps);
  };
  auto linear = [&](V x, const std::string& name, int64_t out, int64_t in) {
    return ops::linear(x, W(name + ".weight", {out, in}), W(name + ".bias", {out}));
  };

  V x = layernorm(b.reshape(ops::embed(W("token_embd.weight", {cfg.vocab, dim}), tokens), {1, n, dim}), "token_embd_norm");
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    V h = layernorm(x, p + "attn_norm");
    V qkv = linear(h, p + "attn_qkv", 3 * dim, dim);
    V q = split_heads(b.slice_axis(qkv, -1, 0, dim), nh, hd);
    V k = split_heads(b.slice_axis(qkv, -1, dim, 2 * dim), nh, hd);
    V v = split_heads(b.slice_axis(qkv, -1, 2 * dim, 3 * dim), nh, hd);
    V att;
    if (step.cached) {
      V kc = b.state(str_cat("k_cache.", l), DType::kF32, {1, nh, lk, hd}, ir::StateRole::kKeyCache, static_cast<int>(l));
      V vc = b.state(str_cat("v_cache.", l), DType::kF32, {1, nh, lk, hd}, ir::StateRole::kValueCache, static_cast<int>(l));
      att = ops::attention_masked(q, k, v, kc, vc, pos, mask, attn).out;
    } else {
      att = ops::attention_prefill(q, k, v, mask, attn);
    }
    x = x + linear(merge_heads(att), p + "attn_output", dim, dim);
    V f = layernorm(x, p + "ffn_norm");
    x = x + linear(ops::gelu_tanh(linear(f, p + "ffn_up", cfg.hidden_dim, dim)), p + "ffn_down", dim, cfg.hidden_dim);
  }
  V out = layernorm(x, "output_norm");
  V logits = ops::linear(out, W("token_embd.weight", {cfg.vocab, dim}));
  b.output("logits", b.reshape(logits, {n, cfg.vocab}));
  return b.finish();
}

}  // namespace kvf::models
