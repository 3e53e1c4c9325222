// Toy llama: a config and seeded random weights for the llama tracer.
#include "models/toy_llama.h"

#include <cmath>
#include <random>

#include "models/llama.h"

namespace kvf::models {

Status ToyLlamaConfig::check() const {
  if (n_heads <= 0 || dim % n_heads != 0) return invalid_input("toy llama: dim ", dim, " is not a multiple of n_heads ", n_heads);
  if (window < 0) return invalid_input("toy llama: negative window");
  return model_config().check();
}

ModelConfig ToyLlamaConfig::model_config() const {
  ModelConfig c;
  c.arch = "llama";
  c.vocab = vocab;
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = n_heads > 0 ? dim / n_heads : 0;
  c.hidden_dim = hidden_dim;
  c.context = max_seq;
  c.norm_eps = norm_eps;
  c.rope_theta = rope_theta;
  c.rope_layout = rope_layout;
  c.sliding_window = window;
  return c;
}

namespace {

Result<HostTensor> uniform(std::mt19937_64& rng, Shape shape, double lo, double hi) {
  Result<HostTensor> t = HostTensor::zeros(DType::kF32, std::move(shape));
  if (!t) return t;
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = static_cast<float>(dist(rng));
  return t;
}

}  // namespace

Result<Weights> random_toy_weights(const ToyLlamaConfig& cfg, uint64_t seed) {
  Status ok = cfg.check();
  if (!ok) return ok.take_error();
  const ModelConfig mc = cfg.model_config();
  std::mt19937_64 rng(seed);
  Weights w("synthetic toy llama");
  auto add = [&](const std::string& name, Shape shape, bool norm) -> Status {
    const double a = norm ? 0.2 : 1.0 / std::sqrt(static_cast<double>(shape.back()));
    Result<HostTensor> t = norm ? uniform(rng, std::move(shape), 1.0 - a, 1.0 + a) : uniform(rng, std::move(shape), -a, a);
    if (!t) return t.take_error();
    w.add(name, std::move(*t));
    return {};
  };
  std::vector<std::tuple<std::string, Shape, bool>> specs{{"token_embd.weight", {mc.vocab, mc.dim}, false}};
  for (int64_t l = 0; l < mc.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    specs.insert(specs.end(), {{p + "attn_norm.weight", {mc.dim}, true},
                               {p + "attn_q.weight", {mc.dim, mc.dim}, false},
                               {p + "attn_k.weight", {mc.kv_dim(), mc.dim}, false},
                               {p + "attn_v.weight", {mc.kv_dim(), mc.dim}, false},
                               {p + "attn_output.weight", {mc.dim, mc.dim}, false},
                               {p + "ffn_norm.weight", {mc.dim}, true},
                               {p + "ffn_gate.weight", {mc.hidden_dim, mc.dim}, false},
                               {p + "ffn_up.weight", {mc.hidden_dim, mc.dim}, false},
                               {p + "ffn_down.weight", {mc.dim, mc.hidden_dim}, false}});
  }
  specs.push_back({"output_norm.weight", {mc.dim}, true});
  specs.push_back({"output.weight", {mc.vocab, mc.dim}, false});
  for (auto& [name, shape, norm] : specs) {
    Status s = add(name, shape, norm);
    if (!s) return s.take_error();
  }
  return w;
}

Result<ir::Graph> trace_toy_llama(const ToyLlamaConfig& cfg, const Weights& w, int64_t n_tokens, ToyMode mode) {
  Status ok = cfg.check();
  if (!ok) return ok.take_error();
  const bool cached = mode == ToyMode::kCached;
  return trace_llama(cfg.model_config(), w, {.n_tokens = n_tokens, .capacity = cached ? cfg.max_seq : 0, .cached = cached});
}

}  // namespace kvf::models
