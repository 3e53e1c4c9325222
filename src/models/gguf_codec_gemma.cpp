// The GGUF codecs of gemma2 and gemma3. llama.cpp's gemma files store every RMSNorm weight as
// 1 + w (HF keeps w and adds the 1 in the norm), derive the attention scale from the shape
// (1/sqrt(head_dim), or 1/sqrt(dim/heads) for the 27B layer counts) instead of storing
// query_pre_attn_scalar, and mark sliding layers by a period: layer l slides when
// l % P < P - 1 (P = 0: every layer). Writing folds a scale the rule does not give into the
// queries (gemma2's attn_q rows; gemma3's q norm, which the q rows cannot carry through the
// norm), so llama.cpp computes the same attention.
#include <cmath>

#include "models/gguf_codec.h"
#include "models/gguf_keys.h"

namespace kvf::models {
namespace {

struct GemmaRules {
  int64_t big_layers;          // the 27B's depth, whose scale llama.cpp takes from dim/heads
  int64_t default_period;      // sliding_window_pattern when absent
  bool attn_softcap;           // llama.cpp applies an attention softcap (gemma2: always)
  double default_final_cap;    // final_logit_softcapping when absent
  int64_t default_window;      // attention.sliding_window when absent (0: no sliding layers)
};
constexpr GemmaRules kGemma2{46, 2, true, 30.0, 4096};
constexpr GemmaRules kGemma3{62, 6, false, 0.0, 0};

double rule_scale(const ModelConfig& c, const GemmaRules& r) {
  const double d = c.n_layers == r.big_layers ? static_cast<double>(c.dim / c.n_heads) : static_cast<double>(c.head_dim);
  return 1.0 / std::sqrt(d);
}

bool slides(int64_t layer, int64_t period) { return period == 0 || layer % period < period - 1; }

Status read_gemma(const load::GgufFile& f, const std::string& arch, ModelConfig& c, const GemmaRules& r) {
  Status s = read_llama_like(f, arch, ir::ops::RopeLayout::kHalf, c);
  if (!s) return s;
  auto key = [&](const char* k) { return str_cat(arch, ".", k); };
  c.embed_scale = std::sqrt(static_cast<double>(c.dim));
  c.norm_unit_offset = false;  // stored as 1 + w
  c.gelu_tanh = true;
  c.attn_scale = rule_scale(c, r);
  c.attn_softcap = r.attn_softcap ? f.get_float_or(key("attn_logit_softcapping"), 50.0) : 0.0;
  c.final_softcap = f.get_float_or(key("final_logit_softcapping"), r.default_final_cap);
  c.sliding_window = f.get_int_or(key("attention.sliding_window"), r.default_window);
  if (c.sliding_window > 0) {
    const int64_t period = f.get_int_or(key("attention.sliding_window_pattern"), r.default_period);
    for (int64_t l = 0; l < c.n_layers; ++l) c.layer_sliding.push_back(slides(l, period));
    const double local = f.get_float_or(key("rope.freq_base_swa"), c.rope_theta);
    c.rope_theta_local = local == c.rope_theta ? 0.0 : local;
  }
  return {};
}

Status read_gemma2(const load::GgufFile& f, const std::string& arch, ModelConfig& c) { return read_gemma(f, arch, c, kGemma2); }
Status read_gemma3(const load::GgufFile& f, const std::string& arch, ModelConfig& c) { return read_gemma(f, arch, c, kGemma3); }

// The period P whose rule gives the model's sliding layers, or -1 when none does.
int64_t sliding_period(const ModelConfig& c) {
  for (int64_t p = 0; p <= c.n_layers + 1; ++p) {
    bool all = true;
    for (int64_t l = 0; l < c.n_layers && all; ++l) all = c.sliding(l) == slides(l, p);
    if (all) return p;
  }
  return -1;
}

Status check_gemma(const ModelConfig& c, const GemmaRules& r) {
  if (!c.rope_inv_freq.empty() || c.rotary_dim != 0) return unsupported("GGUF export: ", c.arch, " with scaled or partial rope");
  if (c.attn_bias || c.n_experts > 0 || !c.gelu_tanh) return unsupported("GGUF export: ", c.arch, " with biases, experts or the erf GELU");
  if (c.rope_layout != ir::ops::RopeLayout::kHalf) return unsupported("GGUF export: ", c.arch, " with interleaved rope pairs");
  if (c.embed_scale != std::sqrt(static_cast<double>(c.dim))) return unsupported("GGUF export: ", c.arch, " without the sqrt(dim) embedding scale");
  if (r.attn_softcap && (c.attn_softcap <= 0 || c.final_softcap <= 0 || !c.tie_embeddings)) {
    return unsupported("GGUF export: gemma2 without both softcaps or with an untied head (llama.cpp's gemma2 has both and ties)");
  }
  if (!r.attn_softcap && c.attn_softcap > 0) return unsupported("GGUF export: gemma3 with an attention softcap");
  if (r.attn_softcap && c.sliding_window <= 0) return unsupported("GGUF export: gemma2 without a sliding window");
  if (c.sliding_window > 0 && sliding_period(c) < 0) {
    return unsupported("GGUF export: ", c.arch, "'s sliding layers follow no period (llama.cpp marks them by one)");
  }
  if (c.rope_theta_local > 0 && c.sliding_window <= 0) return unsupported("GGUF export: a local rope base without sliding layers");
  return {};
}

Status check_gemma2(const ModelConfig& c) { return check_gemma(c, kGemma2); }
Status check_gemma3(const ModelConfig& c) { return check_gemma(c, kGemma3); }

void write_gemma(const ModelConfig& c, const std::string& arch, load::GgufWriter& w, const GemmaRules& r) {
  write_llama_like(c, arch, w);
  if (r.attn_softcap) w.set_f32(arch + ".attn_logit_softcapping", static_cast<float>(c.attn_softcap));
  if (c.final_softcap > 0) w.set_f32(arch + ".final_logit_softcapping", static_cast<float>(c.final_softcap));
  if (c.sliding_window > 0) {
    w.set_u32(arch + ".attention.sliding_window", u32(c.sliding_window));
    w.set_u32(arch + ".attention.sliding_window_pattern", u32(sliding_period(c)));
    w.set_f32(arch + ".rope.freq_base_swa", static_cast<float>(c.rope_theta_local > 0 ? c.rope_theta_local : c.rope_theta));
  }
}

void write_gemma2(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) { write_gemma(c, arch, w, kGemma2); }
void write_gemma3(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) { write_gemma(c, arch, w, kGemma3); }

// x -> a * (x + offset), in f32.
Result<HostTensor> affine(const HostTensor& t, float offset, float a) {
  Result<std::vector<float>> x = t.to_f32();
  if (!x) return x.take_error();
  for (float& v : *x) v = a * (v + offset);
  return HostTensor::from_f32(t.shape(), *x);
}

Result<Weights> gemma_to_gguf(const ModelConfig& c, const Weights& w, const GemmaRules& r) {
  // q * fold under llama.cpp's scale gives the model's scores.
  const double scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const auto fold = static_cast<float>(scale / rule_scale(c, r));
  const float unit = c.norm_unit_offset ? 1.0f : 0.0f;
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    Result<HostTensor> laid = t;
    if (name.ends_with("attn_q_norm.weight")) laid = affine(t, unit, fold);
    else if (name.ends_with("norm.weight")) laid = affine(t, unit, 1.0f);
    else if (name.ends_with("attn_q.weight") && !c.qk_norm) laid = affine(t, 0.0f, fold);
    if (!laid) return laid.take_error().context("tensor ", name);
    out.add(name, std::move(*laid));
  }
  return out;
}

Result<Weights> gemma2_to_gguf(const ModelConfig& c, const Weights& w) { return gemma_to_gguf(c, w, kGemma2); }
Result<Weights> gemma3_to_gguf(const ModelConfig& c, const Weights& w) { return gemma_to_gguf(c, w, kGemma3); }

}  // namespace

const GgufCodec kGemma2Gguf{.read_config = read_gemma2, .check_export = check_gemma2, .write_config = write_gemma2,
                            .to_gguf = gemma2_to_gguf};
const GgufCodec kGemma3Gguf{.read_config = read_gemma3, .check_export = check_gemma3, .write_config = write_gemma3,
                            .to_gguf = gemma3_to_gguf};

}  // namespace kvf::models
