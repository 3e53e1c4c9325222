// Toy llama: random weights and a tracer that reads top to bottom like llama2.c's forward.
#include "models/toy_llama.h"

#include <cmath>
#include <random>

#include "ir/builder.h"

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

Status ToyLlamaConfig::check() const {
  if (vocab <= 0 || dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || hidden_dim <= 0 || max_seq <= 0) {
    return invalid_input("toy llama: every size must be positive");
  }
  if (dim % n_heads != 0) return invalid_input("toy llama: dim ", dim, " is not a multiple of n_heads ", n_heads);
  if (n_heads % n_kv_heads != 0) {
    return invalid_input("toy llama: n_heads ", n_heads, " is not a multiple of n_kv_heads ", n_kv_heads);
  }
  if (head_dim() % 2 != 0) return invalid_input("toy llama: head dim ", head_dim(), " must be even for rope");
  if (window < 0) return invalid_input("toy llama: negative window");
  return {};
}

namespace {

Result<HostTensor> random_tensor(std::mt19937_64& rng, Shape shape, double lo, double hi) {
  Result<HostTensor> t = HostTensor::zeros(DType::kF32, std::move(shape));
  if (!t) return t;
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = static_cast<float>(dist(rng));
  return t;
}

}  // namespace

Result<ToyLlamaWeights> random_toy_weights(const ToyLlamaConfig& cfg, uint64_t seed) {
  Status ok = cfg.check();
  if (!ok) return ok.take_error();
  std::mt19937_64 rng(seed);
  std::optional<Error> err;
  auto mat = [&](int64_t rows, int64_t cols) {
    const double a = 1.0 / std::sqrt(static_cast<double>(cols));
    Result<HostTensor> t = random_tensor(rng, {rows, cols}, -a, a);
    if (!t) {
      if (!err) err = t.take_error();
      return HostTensor{};
    }
    return std::move(*t);
  };
  auto norm = [&]() {
    Result<HostTensor> t = random_tensor(rng, {cfg.dim}, 0.8, 1.2);
    if (!t) {
      if (!err) err = t.take_error();
      return HostTensor{};
    }
    return std::move(*t);
  };
  ToyLlamaWeights w;
  w.tok_emb = mat(cfg.vocab, cfg.dim);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    ToyLayerWeights lw;
    lw.attn_norm = norm();
    lw.wq = mat(cfg.dim, cfg.dim);
    lw.wk = mat(cfg.kv_dim(), cfg.dim);
    lw.wv = mat(cfg.kv_dim(), cfg.dim);
    lw.wo = mat(cfg.dim, cfg.dim);
    lw.ffn_norm = norm();
    lw.w_gate = mat(cfg.hidden_dim, cfg.dim);
    lw.w_up = mat(cfg.hidden_dim, cfg.dim);
    lw.w_down = mat(cfg.dim, cfg.hidden_dim);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = norm();
  w.output = mat(cfg.vocab, cfg.dim);
  if (err) return *err;
  return w;
}

Result<ir::Graph> trace_toy_llama(const ToyLlamaConfig& cfg, const ToyLlamaWeights& w, int64_t n_tokens,
                                  ToyMode mode) {
  Status ok = cfg.check();
  if (!ok) return ok.take_error();
  if (n_tokens <= 0) return invalid_input("toy llama: a step needs at least one token");
  const bool cached = mode == ToyMode::kCached;
  const int64_t n = n_tokens, hd = cfg.head_dim(), nh = cfg.n_heads, nkv = cfg.n_kv_heads;
  const int64_t lk = cached ? cfg.max_seq : n;  // keys each query row sees
  ir::Builder b(cached ? str_cat("toy_llama.step", n) : str_cat("toy_llama.full", n));

  V tokens = b.slot(ir::Slot::kToken, DType::kI32, {n});
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {n});
  ops::RopeSpec rope{.head_dim = hd, .rotary_dim = 0, .theta = cfg.rope_theta, .layout = cfg.rope_layout, .inv_freq = {}};
  ops::RopeTables rt = ops::rope_tables(pos, rope);
  V mask = cfg.window > 0 ? ops::sliding_window_mask(pos, lk, cfg.window) : ops::causal_mask(pos, lk);
  const ops::AttnOpts attn{.scale = 1.0 / std::sqrt(static_cast<double>(hd)), .softcap = 0.0};

  // x: [1, n, dim]
  V x = b.reshape(ops::embed(b.constant("tok_emb", w.tok_emb), tokens), {1, n, cfg.dim});
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const ToyLayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const int li = static_cast<int>(l);
    auto weight = [&](const char* name, const HostTensor& t) { return b.constant(str_cat(name, ".", l), t); };
    // attention: q/k/v [1, n, H*hd] -> [1, H, n, hd], rope on q and k
    V h = b.name(ops::rmsnorm(x, weight("attn_norm", lw.attn_norm), cfg.norm_eps), "attn_norm", li);
    auto heads = [&](V t, int64_t count) { return b.transpose(b.reshape(t, {1, n, count, hd}), {0, 2, 1, 3}); };
    V q = ops::apply_rope(heads(ops::linear(h, weight("wq", lw.wq)), nh), rt);
    V k = ops::apply_rope(heads(ops::linear(h, weight("wk", lw.wk)), nkv), rt);
    V v = heads(ops::linear(h, weight("wv", lw.wv)), nkv);
    V att;
    if (cached) {
      V kc = b.state(str_cat("k_cache.", l), DType::kF32, {1, nkv, cfg.max_seq, hd}, ir::StateRole::kKeyCache, li);
      V vc = b.state(str_cat("v_cache.", l), DType::kF32, {1, nkv, cfg.max_seq, hd}, ir::StateRole::kValueCache, li);
      att = ops::attention_masked(q, k, v, kc, vc, pos, mask, attn).out;
    } else {
      att = ops::attention_prefill(q, k, v, mask, attn);
    }
    att = b.reshape(b.transpose(att, {0, 2, 1, 3}), {1, n, cfg.dim});
    x = b.name(x + ops::linear(att, weight("wo", lw.wo)), "attn_out", li);
    // feed-forward: SwiGLU
    V f = b.name(ops::rmsnorm(x, weight("ffn_norm", lw.ffn_norm), cfg.norm_eps), "ffn_norm", li);
    V gate = ops::linear(f, weight("w_gate", lw.w_gate));
    V up = ops::linear(f, weight("w_up", lw.w_up));
    V g = ops::swiglu(gate, up);
    x = b.name(x + ops::linear(g, weight("w_down", lw.w_down)), "ffn_out", li);
  }
  V out = ops::rmsnorm(x, b.constant("final_norm", w.final_norm), cfg.norm_eps);
  V logits = b.reshape(ops::linear(out, b.constant("output", w.output)), {n, cfg.vocab});
  b.output("logits", logits);
  return b.finish();
}

int64_t kv_cache_bytes(const ToyLlamaConfig& cfg, int64_t tokens, int64_t bytes_per_elem) {
  return 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim() * tokens * bytes_per_elem;
}

}  // namespace kvf::models
