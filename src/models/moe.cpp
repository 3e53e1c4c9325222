// Routed experts as traced primitives (models/moe.h).
#include "models/moe.h"

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

V top_k_scores(V scores, int64_t k) {
  ir::Builder& b = *scores.b;
  const int64_t n = scores.dim(1), e = scores.dim(2);
  const Shape pairs{1, n, e, e};  // [.., e, j]: expert e against expert j
  V mine = b.broadcast(b.reshape(scores, {1, n, e, 1}), pairs);
  V theirs = b.broadcast(b.reshape(scores, {1, n, 1, e}), pairs);
  V lower_index = b.compare(b.iota({e, e}, 1), b.iota({e, e}, 0), ir::CmpDir::kLt);  // j < e
  V before = b.select(b.broadcast(lower_index, pairs), b.like(scores, 1.0), b.like(scores, 0.0));
  V above = b.select(b.compare(theirs, mine, ir::CmpDir::kGt), b.like(scores, 1.0), b.like(scores, 0.0));
  V tied = b.select(b.compare(theirs, mine, ir::CmpDir::kEq), before, b.like(scores, 0.0));
  V rank = b.reduce_sum(above + tied, {3});
  return b.select(b.compare(rank, b.like(rank, static_cast<double>(k)), ir::CmpDir::kLt), scores, b.like(scores, 0.0));
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
  V scores = ops::softmax(ops::linear(x, weight(b, w, p + "ffn_gate_inp.weight", {cfg.n_experts, dim})));
  V picked = top_k_scores(scores, cfg.n_experts_used);
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
    out = out + gated_unit(b, w, p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight", p + "ffn_down_shexp.weight", dim,
                           ff * cfg.n_shared_experts, x);
  }
  return out;
}

}  // namespace kvf::models
