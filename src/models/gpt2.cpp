// GPT-2 tracer: embed + learned positions, pre-LN blocks, final LN, tied logits.
#include "models/gpt2.h"

#include <cmath>

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Result<ir::Graph> trace_gpt2(const ModelConfig& cfg, const Weights& w, const StepSpec& step) {
  Status ok = check_step(cfg, step);
  if (!ok) return ok.take_error();
  const int64_t n = step_tokens(step), dim = cfg.dim;
  StepTrace t(cfg, step);
  ir::Builder& b = t.b;
  const V pos = t.pos;
  const V mask = step_masks(cfg, step, t).full;
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, name, shape); };
  auto layernorm = [&](V x, const std::string& name) {
    return ops::layernorm(x, W(name + ".weight", {dim}), W(name + ".bias", {dim}), cfg.norm_eps);
  };

  V pos_emb = b.reshape(ops::embed(W("position_embd.weight", {cfg.context, dim}), pos), {1, n, dim});
  V x = embed_tokens(t, cfg, w) + pos_emb;
  for (int64_t l = 0; l < cfg.n_layers; ++l) x = layernorm_block(cfg, w, step, l, x, pos, mask);
  V out = layernorm(classifier_rows(step, x), "output_norm");
  V logits = ops::linear(out, W("token_embd.weight", {cfg.vocab, dim}));
  return finish_logits(t, cfg, logits);
}

}  // namespace kvf::models
