// BLOOM tracer: embedding LayerNorm, pre-LN blocks with ALiBi attention, tied logits.
#include "models/bloom.h"

#include <cmath>

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Result<ir::Graph> trace_bloom(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = check_step(cfg, step);
  if (!ok) return ok.take_error();
  const int64_t dim = cfg.dim;
  StepTrace t(cfg, step);
  ir::Builder& b = t.b;
  const V pos = t.pos;
  // ALiBi: slope_h * key position; softmax ignores the per-row constant -slope_h * query.
  V alibi = ops::alibi_bias(b, ops::alibi_slopes(cfg.n_heads), t.keys);
  const V mask = step_masks(cfg, step, t).full + alibi;  // [R, H, n, keys]
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, name, shape); };
  auto layernorm = [&](V x, const std::string& name) {
    return ops::layernorm(x, W(name + ".weight", {dim}), W(name + ".bias", {dim}), cfg.norm_eps);
  };

  V x = layernorm(embed_tokens(t, cfg, w), "token_embd_norm");
  for (int64_t l = 0; l < cfg.n_layers; ++l) x = layernorm_block(cfg, w, step, l, x, pos, mask);
  V out = layernorm(classifier_rows(step, x), "output_norm");
  V logits = ops::linear(out, W("token_embd.weight", {cfg.vocab, dim}));
  return finish_logits(t, cfg, logits);
}

}  // namespace kvf::models
