// Routed experts as traced primitives (models/moe.h).
#include "models/moe.h"

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

namespace {

// DeepSeek-V3's pick over sigmoid scores [1, n, E]: the bias added for the choice alone, the
// choice restricted to the best groups (a group's score: its two best), masked experts
// counted as 0 (as the reference fills them). Returns the picked experts' scores, 0 elsewhere.
V grouped_pick(const ModelConfig& cfg, V scores, V bias) {
  ir::Builder& b = *scores.b;
  const int64_t n = scores.dim(1), e = cfg.n_experts, g = cfg.expert_groups, per = e / g;
  V choice = scores + b.broadcast(b.reshape(bias, {1, 1, e}), {1, n, e});
  if (g > 1) {
    V grouped = b.reshape(choice, {1, n, g, per});
    V best2 = b.reduce_sum(b.select(ops::rank_below(grouped, 2), grouped, b.like(grouped, 0.0)), {3});
    V keep = b.reshape(b.broadcast(b.reshape(ops::rank_below(best2, cfg.expert_groups_used), {1, n, g, 1}), {1, n, g, per}),
                       {1, n, e});
    choice = b.select(keep, choice, b.like(choice, 0.0));
  }
  return b.select(ops::rank_below(choice, cfg.n_experts_used), scores, b.like(scores, 0.0));
}

}  // namespace

V top_k_scores(V scores, int64_t k) {
  ir::Builder& b = *scores.b;
  return b.select(ops::rank_below(scores, k), scores, b.like(scores, 0.0));
}

namespace {

V gated_unit(ir::Builder& b, const Weights& w, const std::string& gate, const std::string& up, const std::string& down,
             int64_t dim, int64_t ff, V x) {
  V g = ops::linear(x, weight(b, w, gate, {ff, dim}));
  V u = ops::linear(x, weight(b, w, up, {ff, dim}));
  return ops::linear(ops::swiglu(g, u), weight(b, w, down, {dim, ff}));
}

}  // namespace

V moe_ffn(const ModelConfig& cfg, const Weights& w, const std::string& p, V x) {
  ir::Builder& b = *x.b;
  const int64_t n = x.dim(1), dim = cfg.dim, ff = cfg.expert_hidden_dim;
  V logits = ops::linear(x, weight(b, w, p + "ffn_gate_inp.weight", {cfg.n_experts, dim}));
  V picked = cfg.expert_sigmoid ? grouped_pick(cfg, ops::sigmoid(logits), weight(b, w, p + "exp_probs_b.bias", {cfg.n_experts}))
                                : top_k_scores(ops::softmax(logits), cfg.n_experts_used);
  if (cfg.expert_weights_norm) picked = picked / (b.reduce_sum(picked, {2}, true) + 1e-20);
  if (cfg.expert_weights_scale != 1.0) picked = picked * cfg.expert_weights_scale;
  V out;
  for (int64_t e = 0; e < cfg.n_experts; ++e) {
    const std::string id = str_cat("_exp.", e, ".weight");
    V y = gated_unit(b, w, p + "ffn_gate" + id, p + "ffn_up" + id, p + "ffn_down" + id, dim, ff, x);
    V term = y * b.broadcast(b.slice_axis(picked, -1, e, e + 1), {1, n, dim});
    out = e == 0 ? term : out + term;
  }
  if (cfg.n_shared_experts > 0) {
    const int64_t width = cfg.shared_expert_hidden_dim > 0 ? cfg.shared_expert_hidden_dim : ff * cfg.n_shared_experts;
    V shared = gated_unit(b, w, p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight", p + "ffn_down_shexp.weight", dim,
                          width, x);
    if (cfg.shared_expert_gated) {
      V gate = ops::sigmoid(ops::linear(x, weight(b, w, p + "ffn_gate_inp_shexp.weight", {1, dim})));
      shared = shared * b.broadcast(gate, {1, n, dim});
    }
    out = out + shared;
  }
  return out;
}

}  // namespace kvf::models
