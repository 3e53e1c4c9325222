// Synthetic models: size presets, per-family weight shapes, seeded random weights.
#include "models/synthetic.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvf::models {
namespace {

// How a preset's weights are drawn.
enum class Init {
  kFanIn,   // matrices uniform in ±1/sqrt(fan_in), norms 1 ± 0.2, biases ±0.02
  kNormal,  // matrices N(0, 0.02) (the usual transformer init), norms exactly 1, biases 0
};

using Shapes = std::vector<std::pair<std::string, Shape>>;

Shapes llama_shapes(const ModelConfig& c) {
  Shapes s{{"token_embd.weight", {c.vocab, c.dim}}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    s.insert(s.end(), {{p + "attn_norm.weight", {c.dim}},
                       {p + "attn_q.weight", {c.n_heads * c.head_dim, c.dim}},
                       {p + "attn_k.weight", {c.kv_dim(), c.dim}},
                       {p + "attn_v.weight", {c.kv_dim(), c.dim}},
                       {p + "attn_output.weight", {c.dim, c.n_heads * c.head_dim}},
                       {p + "ffn_norm.weight", {c.dim}},
                       {p + "ffn_gate.weight", {c.hidden_dim, c.dim}},
                       {p + "ffn_up.weight", {c.hidden_dim, c.dim}},
                       {p + "ffn_down.weight", {c.dim, c.hidden_dim}}});
  }
  s.insert(s.end(), {{"output_norm.weight", {c.dim}}, {"output.weight", {c.vocab, c.dim}}});
  return s;
}

// llama's attention with q/k norms; every layer routed over n_experts SwiGLU experts.
Shapes qwen3moe_shapes(const ModelConfig& c) {
  Shapes s;
  for (auto& [name, shape] : llama_shapes(c)) {
    if (name.find(".ffn_gate.") == std::string::npos && name.find(".ffn_up.") == std::string::npos &&
        name.find(".ffn_down.") == std::string::npos) {
      s.emplace_back(name, shape);
    }
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    s.insert(s.end(), {{p + "attn_q_norm.weight", {c.head_dim}},
                       {p + "attn_k_norm.weight", {c.head_dim}},
                       {p + "ffn_gate_inp.weight", {c.n_experts, c.dim}}});
    for (int64_t e = 0; e < c.n_experts; ++e) {
      const std::string id = str_cat("_exp.", e, ".weight");
      s.insert(s.end(), {{p + "ffn_gate" + id, {c.expert_hidden_dim, c.dim}},
                         {p + "ffn_up" + id, {c.expert_hidden_dim, c.dim}},
                         {p + "ffn_down" + id, {c.dim, c.expert_hidden_dim}}});
    }
  }
  return s;
}

Shapes gpt2_shapes(const ModelConfig& c) {
  Shapes s{{"token_embd.weight", {c.vocab, c.dim}}, {"position_embd.weight", {c.context, c.dim}}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    const std::pair<const char*, Shape> mats[] = {{"attn_qkv", {3 * c.dim, c.dim}},
                                                  {"attn_output", {c.dim, c.dim}},
                                                  {"ffn_up", {c.hidden_dim, c.dim}},
                                                  {"ffn_down", {c.dim, c.hidden_dim}}};
    for (const char* norm : {"attn_norm", "ffn_norm"}) {
      s.push_back({p + norm + ".weight", {c.dim}});
      s.push_back({p + norm + ".bias", {c.dim}});
    }
    for (const auto& [name, shape] : mats) {
      s.push_back({p + name + ".weight", shape});
      s.push_back({p + name + ".bias", {shape[0]}});
    }
  }
  s.insert(s.end(), {{"output_norm.weight", {c.dim}}, {"output_norm.bias", {c.dim}}});
  return s;
}

struct Preset {
  const char* spec;
  const char* arch;                       // a family of models/registry.h
  Shapes (*shapes)(const ModelConfig&);   // its weights' names and shapes
  int64_t vocab, dim, layers, heads, kv_heads, hidden, context;
  Init init = Init::kFanIn;
  int64_t experts = 0, experts_used = 0;  // routed layers (hidden is then each expert's width)
};

// Shapes of published models (llama2.c's stories, TinyLlama, Llama-3-8B, GPT-2 small), and the
// benchmark model: llama-125m, a GQA llama of ~125M parameters whose 32000-token vocabulary
// fits llama.cpp's ggml-vocab-llama-spm.gguf (`kvforge convert --vocab`); its context is
// long enough for decode at depth 16384. gpt2-124m is GPT-2 small with a 4096-position
// table (GPT-2 has 1024), so that seed 003's decode curve reaches a 4k context. The
// qwen3moe presets take the same vocabulary: qwen3moe-0.5b is a Qwen3-MoE of ~0.5B
// parameters (8 experts, 2 a token: ~0.17B active), the mixture-of-experts benchmark model;
// qwen3moe-tiny its 2-layer miniature for tests.
constexpr Preset kPresets[] = {
    {"llama-260k", "llama", llama_shapes, 512, 64, 5, 8, 4, 172, 512},
    {"llama-15m", "llama", llama_shapes, 32000, 288, 6, 6, 6, 768, 256},
    {"llama-110m", "llama", llama_shapes, 32000, 768, 12, 12, 12, 2048, 1024},
    {"llama-125m", "llama", llama_shapes, 32000, 768, 12, 12, 4, 2048, 32768, Init::kNormal},
    {"llama-1.1b", "llama", llama_shapes, 32000, 2048, 22, 32, 4, 5632, 2048},
    {"llama-8b", "llama", llama_shapes, 128256, 4096, 32, 32, 8, 14336, 8192},
    {"gpt2-124m", "gpt2", gpt2_shapes, 50257, 768, 12, 12, 12, 3072, 4096},
    {"qwen3moe-tiny", "qwen3moe", qwen3moe_shapes, 32000, 128, 2, 4, 2, 64, 2048, Init::kFanIn, 4, 2},
    {"qwen3moe-0.5b", "qwen3moe", qwen3moe_shapes, 32000, 1024, 16, 16, 4, 1024, 4096, Init::kNormal, 8, 2},
};

bool is_norm_weight(const std::string& name) {
  return name.find("norm") != std::string::npos && name.ends_with(".weight");
}

// Norm weights near 1, biases near 0, matrices uniform in ±1/sqrt(fan_in).
void fill_fan_in(HostTensor& t, bool norm, std::mt19937_64& rng) {
  const Shape& shape = t.shape();
  const double a = shape.size() == 1 ? (norm ? 0.2 : 0.02) : 1.0 / std::sqrt(static_cast<double>(shape.back()));
  std::uniform_real_distribution<float> dist(static_cast<float>(-a), static_cast<float>(a));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = (norm ? 1.0f : 0.0f) + dist(rng);
}

// A uniform double in (0, 1] from the top 53 bits; mt19937_64's output is fixed by the
// standard, so these weights are the same with every standard library (unlike
// std::normal_distribution's).
double unit_open(std::mt19937_64& rng) { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; }

// Matrices N(0, 0.02) by Box-Muller, norms 1, biases 0.
void fill_normal(HostTensor& t, bool norm, std::mt19937_64& rng) {
  float* p = t.data<float>();
  if (t.rank() == 1) {
    std::fill(p, p + t.numel(), norm ? 1.0f : 0.0f);
    return;
  }
  constexpr double kStd = 0.02, kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < t.numel(); i += 2) {
    const double r = kStd * std::sqrt(-2.0 * std::log(unit_open(rng))), phi = kTwoPi * unit_open(rng);
    p[i] = static_cast<float>(r * std::cos(phi));
    if (i + 1 < t.numel()) p[i + 1] = static_cast<float>(r * std::sin(phi));
  }
}

Status fill(Weights& w, const Shapes& shapes, Init init, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& [name, shape] : shapes) {
    Result<HostTensor> t = HostTensor::zeros(DType::kF32, shape);
    if (!t) return t.take_error();
    if (init == Init::kNormal) {
      fill_normal(*t, is_norm_weight(name), rng);
    } else {
      fill_fan_in(*t, is_norm_weight(name), rng);
    }
    w.add(name, std::move(*t));
  }
  return {};
}

}  // namespace

std::vector<std::string> synthetic_specs() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.push_back(p.spec);
  return out;
}

Result<Model> open_synthetic(const std::string& spec, uint64_t seed) {
  const Preset* preset = nullptr;
  for (const Preset& p : kPresets) {
    if (spec == p.spec) preset = &p;
  }
  if (!preset) {
    std::string known;
    for (const std::string& s : synthetic_specs()) known += (known.empty() ? "" : ", ") + s;
    return invalid_input("synthetic:", spec, " is not a known size (known: ", known, ")");
  }
  Model m;
  m.source = "synthetic:" + spec;
  ModelConfig& c = m.config;
  c.arch = preset->arch;
  c.vocab = preset->vocab;
  c.dim = preset->dim;
  c.n_layers = preset->layers;
  c.n_heads = preset->heads;
  c.n_kv_heads = preset->kv_heads;
  c.head_dim = preset->dim / preset->heads;
  c.hidden_dim = preset->hidden;
  c.context = preset->context;
  c.rope_layout = ir::ops::RopeLayout::kInterleaved;  // as llama2.c's models (and GGUF) store them
  if (preset->experts > 0) {  // qwen3moe: rotate-half rope and q/k norms, as Qwen stores them
    c.rope_layout = ir::ops::RopeLayout::kHalf;
    c.qk_norm = true;
    c.n_experts = preset->experts;
    c.n_experts_used = preset->experts_used;
    c.expert_hidden_dim = preset->hidden;
    c.expert_layers.assign(static_cast<size_t>(c.n_layers), true);
    c.expert_weights_norm = true;
  }
  c.bos = 1;
  c.eos = 2;
  m.weights = Weights(m.source);
  Status s = fill(m.weights, preset->shapes(c), preset->init, seed);
  if (!s) return s.take_error();
  return m;
}

}  // namespace kvf::models
