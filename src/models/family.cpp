// Shared tracer pieces.
#include "models/family.h"

#include <cmath>

namespace kvf::models {

Status check_step(const ModelConfig& cfg, const StepSpec& step) {
  Status ok = cfg.check();
  if (!ok) return ok;
  if (step.n_tokens <= 0) return invalid_input(cfg.arch, ": a step needs at least one token");
  if (step.cached && step.capacity < step.n_tokens) {
    return capacity(cfg.arch, ": cache capacity ", step.capacity, " is smaller than the step's ", step.n_tokens,
                    " tokens");
  }
  return {};
}

StepTrace::StepTrace(const ModelConfig& cfg, const StepSpec& step)
    : b(str_cat(cfg.arch, step.cached ? ".step" : ".full", step.n_tokens)) {
  tokens = b.slot(ir::Slot::kToken, DType::kI32, {step.n_tokens});
  pos = b.slot(ir::Slot::kPos, DType::kI32, {step.n_tokens});
}

ir::V weight(ir::Builder& b, const Weights& w, const std::string& name, const Shape& shape) {
  Result<HostTensor> t = w.get(name, shape);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);
  }
  const DType stored = t->dtype();
  ir::V v = b.constant(name, std::move(*t));
  return stored == DType::kF32 ? v : b.cast(v, DType::kF32);
}

ir::V classifier_rows(const StepSpec& step, ir::V x) {
  const int64_t n = x.dim(1);
  return step.last_logits && n > 1 ? x.b->slice_axis(x, 1, n - 1, n) : x;
}

ir::V split_heads(ir::V x, int64_t heads, int64_t head_dim) {
  ir::Builder& b = *x.b;
  const int64_t n = x.dim(1);
  return b.transpose(b.reshape(x, {1, n, heads, head_dim}), {0, 2, 1, 3});
}

ir::V merge_heads(ir::V x) {
  ir::Builder& b = *x.b;
  const int64_t heads = x.dim(1), n = x.dim(2), hd = x.dim(3);
  return b.reshape(b.transpose(x, {0, 2, 1, 3}), {1, n, heads * hd});
}

ir::V layer_attention(const StepSpec& step, int64_t layer, ir::V q, ir::V k, ir::V v, ir::V pos, ir::V mask,
                      const ir::ops::AttnOpts& opts) {
  if (!step.cached) return ir::ops::attention_prefill(q, k, v, mask, opts);
  ir::Builder& b = *q.b;
  const int li = static_cast<int>(layer);
  auto cache = [&](const char* name, ir::V x, ir::StateRole role) {
    return b.state(str_cat(name, ".", layer), step.kv_dtype, {1, x.dim(1), step.capacity, x.dim(3)}, role, li);
  };
  ir::V kc = cache("k_cache", k, ir::StateRole::kKeyCache);
  ir::V vc = cache("v_cache", v, ir::StateRole::kValueCache);
  return ir::ops::attention_cached(q, k, v, kc, vc, pos, mask, opts).out;
}

ir::V layernorm_block(const ModelConfig& cfg, const Weights& w, const StepSpec& step, int64_t layer, ir::V x,
                      ir::V pos, ir::V mask) {
  namespace ops = ir::ops;
  ir::Builder& b = *x.b;
  const int64_t dim = cfg.dim, nh = cfg.n_heads, hd = cfg.head_dim;
  const std::string p = str_cat("blk.", layer, ".");
  auto W = [&](const std::string& name, Shape shape) { return weight(b, w, p + name, shape); };
  auto layernorm = [&](ir::V t, const std::string& name) {
    return ops::layernorm(t, W(name + ".weight", {dim}), W(name + ".bias", {dim}), cfg.norm_eps);
  };
  auto linear = [&](ir::V t, const std::string& name, int64_t out, int64_t in) {
    return ops::linear(t, W(name + ".weight", {out, in}), W(name + ".bias", {out}));
  };
  ir::V qkv = linear(layernorm(x, "attn_norm"), "attn_qkv", 3 * dim, dim);  // [1, n, 3 dim]: q | k | v
  ir::V q = split_heads(b.slice_axis(qkv, -1, 0, dim), nh, hd);
  ir::V k = split_heads(b.slice_axis(qkv, -1, dim, 2 * dim), nh, hd);
  ir::V v = split_heads(b.slice_axis(qkv, -1, 2 * dim, 3 * dim), nh, hd);
  const ops::AttnOpts attn{.scale = 1.0 / std::sqrt(static_cast<double>(hd)), .softcap = 0.0};
  ir::V att = layer_attention(step, layer, q, k, v, pos, mask, attn);
  x = x + linear(merge_heads(att), "attn_output", dim, dim);
  ir::V up = linear(layernorm(x, "ffn_norm"), "ffn_up", cfg.hidden_dim, dim);
  ir::V act = cfg.gelu_tanh ? ops::gelu_tanh(up) : ops::gelu_erf(up);
  return x + linear(act, "ffn_down", dim, cfg.hidden_dim);
}

}  // namespace kvf::models
