#include "models/hf_family_config.h"

#include <algorithm>
#include <cmath>

namespace kvf::models {
namespace {

// Reads integer keys in order, stopping at the first failure (no Result dies unchecked).
Status read_ints(const load::HfConfig& hf, std::initializer_list<std::pair<const char*, int64_t*>> keys) {
  for (const auto& [key, out] : keys) {
    Result<int64_t> v = hf.get_int(key);
    if (!v) return v.take_error();
    *out = *v;
  }
  return {};
}

Status rope_from_hf(const load::HfConfig& hf, ModelConfig& c, int64_t rope_dim) {
  const load::HfRope& rope = hf.rope();
  c.rope_theta = rope.theta;
  const auto rot = static_cast<int64_t>(std::lround(static_cast<double>(rope_dim) * rope.partial_rotary_factor));
  c.rotary_dim = rot == rope_dim ? 0 : rot;
  if (rope.type != "default") {
    Result<std::vector<float>> inv = load::scaled_inv_freq(rot, rope);
    if (!inv) return inv.take_error().context(hf.name());
    c.rope_inv_freq = std::move(*inv);
  }
  return {};
}

// Sliding layers from layer_types ("sliding_attention"), or every layer when there is none.
Status sliding_from_hf(const load::HfConfig& hf, ModelConfig& c, bool alternate_by_default) {
  Result<int64_t> window = hf.get_int_or("sliding_window", 0);
  if (!window) return window.take_error();
  Result<bool> use = hf.get_bool_or("use_sliding_window", true);
  if (!use) return use.take_error();
  c.sliding_window = *use ? *window : 0;
  if (c.sliding_window <= 0) return {};
  const std::vector<std::string>& types = hf.layer_types();
  if (!types.empty()) {
    for (const std::string& t : types) c.layer_sliding.push_back(t == "sliding_attention");
  } else if (alternate_by_default) {  // gemma2 before layer_types: even layers slide
    for (int64_t l = 0; l < c.n_layers; ++l) c.layer_sliding.push_back(l % 2 == 0);
  }
  return {};
}

Status llama_like_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = read_ints(hf, {{"hidden_size", &c.dim}, {"num_hidden_layers", &c.n_layers},
                            {"num_attention_heads", &c.n_heads}, {"intermediate_size", &c.hidden_dim},
                            {"vocab_size", &c.vocab}});
  if (!s) return s;
  Result<int64_t> kv = hf.get_int_or("num_key_value_heads", c.n_heads);
  if (!kv) return kv.take_error();
  c.n_kv_heads = *kv;
  c.head_dim = hf.head_dim().value_or(c.n_heads > 0 ? c.dim / c.n_heads : 0);
  Result<int64_t> ctx = hf.get_int_or("max_position_embeddings", 2048);
  if (!ctx) return ctx.take_error();
  c.context = *ctx;
  Result<double> eps = hf.get_float_or("rms_norm_eps", 1e-6);
  if (!eps) return eps.take_error();
  c.norm_eps = *eps;
  c.rope_layout = ir::ops::RopeLayout::kHalf;  // HF rotates halves
  // Biases are detected from the tensors at load; ones no tracer reads (o_proj, mlp) are refused there.
  return rope_from_hf(hf, c, c.head_dim);
}

// The activation a family's config names: SwiGLU families need SiLU, GELU families pick
// the tanh or erf form.
Status activation_from_hf(const load::HfConfig& hf, ModelConfig& c, const char* key, const char* fallback,
                          bool gelu_family) {
  Result<std::string> act = hf.get_string_or(key, fallback);
  if (!act) return act.take_error();
  if (!gelu_family) {
    if (*act == "silu" || *act == "swish") return {};
    return unsupported(hf.name(), ": ", key, " '", *act, "' (the ", c.arch, " tracer computes SwiGLU)");
  }
  if (*act == "gelu_new" || *act == "gelu_pytorch_tanh" || *act == "gelu_fast") c.gelu_tanh = true;
  else if (*act == "gelu") c.gelu_tanh = false;
  else return unsupported(hf.name(), ": ", key, " '", *act, "' is not a GELU kvforge computes");
  return {};
}

}  // namespace

Status llama_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = llama_like_config(hf, c);
  if (!s) return s;
  s = activation_from_hf(hf, c, "hidden_act", "silu", false);
  if (!s) return s;
  return sliding_from_hf(hf, c, false);
}

Status qwen3_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  c.qk_norm = true;
  return llama_hf_config(hf, c);
}

namespace {

// Qwen's routed layers: layer l routed unless listed in mlp_only_layers or off the
// decoder_sparse_step grid ((l + 1) % step != 0); num_experts (or num_local_experts) of
// moe_intermediate_size, softmax scores, top-k, renormalized with norm_topk_prob.
Status qwen_experts_from_hf(const load::HfConfig& hf, ModelConfig& c) {
  // transformers 5 writes the expert count as num_local_experts, earlier releases as num_experts.
  Status s = read_ints(hf, {{hf.has("num_local_experts") ? "num_local_experts" : "num_experts", &c.n_experts},
                     {"num_experts_per_tok", &c.n_experts_used},
                     {"moe_intermediate_size", &c.expert_hidden_dim}});
  if (!s) return s;
  Result<int64_t> step = hf.get_int_or("decoder_sparse_step", 1);
  if (!step) return step.take_error();
  if (*step < 1) return invalid_input(hf.name(), ": decoder_sparse_step ", *step, " must be positive");
  std::vector<int64_t> dense;
  if (hf.has("mlp_only_layers")) {
    Result<std::vector<int64_t>> listed = hf.get_ints("mlp_only_layers");
    if (!listed) return listed.take_error();
    dense = *listed;
  }
  c.expert_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const bool listed = std::find(dense.begin(), dense.end(), l) != dense.end();
    c.expert_layers[static_cast<size_t>(l)] = !listed && (l + 1) % *step == 0;
  }
  Result<bool> norm = hf.get_bool_or("norm_topk_prob", false);
  if (!norm) return norm.take_error();
  c.expert_weights_norm = *norm;
  return {};
}

}  // namespace

// Qwen3-MoE: qwen3 attention, Qwen's routed layers, no shared experts.
Status qwen3_moe_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = qwen3_hf_config(hf, c);
  if (!s) return s;
  return qwen_experts_from_hf(hf, c);
}

// Qwen2-MoE: qwen2 attention (q/k/v biases), Qwen's routed layers, and one shared expert of
// shared_expert_intermediate_size gated by sigmoid(x · shared_expert_gate).
Status qwen2_moe_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = llama_hf_config(hf, c);
  if (!s) return s;
  s = qwen_experts_from_hf(hf, c);
  if (!s) return s;
  Result<int64_t> shared = hf.get_int_or("shared_expert_intermediate_size", 0);
  if (!shared) return shared.take_error();
  if (*shared > 0) {
    c.n_shared_experts = 1;
    c.shared_expert_hidden_dim = *shared;
    c.shared_expert_gated = true;
  }
  return {};
}

// Mixtral: mistral attention; every layer routed over num_local_experts SwiGLU experts of
// intermediate_size, softmax scores, top-k, always renormalized; no shared experts.
Status mixtral_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = llama_hf_config(hf, c);
  if (!s) return s;
  s = read_ints(hf, {{"num_local_experts", &c.n_experts}, {"num_experts_per_tok", &c.n_experts_used}});
  if (!s) return s;
  c.expert_hidden_dim = c.hidden_dim;
  c.expert_layers.assign(static_cast<size_t>(c.n_layers), true);
  c.expert_weights_norm = true;
  return {};
}

Status gemma2_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = llama_like_config(hf, c);
  if (!s) return s;
  Result<double> qscale = hf.get_float_or("query_pre_attn_scalar", static_cast<double>(c.head_dim));
  if (!qscale) return qscale.take_error();
  Result<double> attn_cap = hf.get_float_or("attn_logit_softcapping", 0.0);
  if (!attn_cap) return attn_cap.take_error();
  Result<double> final_cap = hf.get_float_or("final_logit_softcapping", 0.0);
  if (!final_cap) return final_cap.take_error();
  c.attn_scale = 1.0 / std::sqrt(*qscale);
  c.attn_softcap = *attn_cap;
  c.final_softcap = *final_cap;
  c.norm_unit_offset = true;
  c.embed_scale = std::sqrt(static_cast<double>(c.dim));
  s = activation_from_hf(hf, c, "hidden_activation", "gelu_pytorch_tanh", true);
  if (!s) return s;
  return sliding_from_hf(hf, c, true);
}

// Gemma 3 (text): gemma2's layout and scales, q/k norms, and the sliding layers' own rope
// base (rope_parameters.sliding_attention, or rope_local_base_freq).
Status gemma3_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = gemma2_hf_config(hf, c);
  if (!s) return s;
  c.qk_norm = true;
  Result<load::HfRope> local = hf.rope_for_layer_type("sliding_attention");
  if (!local) return local.take_error();
  if (local->type != "default") return unsupported(hf.name(), ": the sliding layers' rope type '", local->type, "'");
  Result<double> theta = hf.get_float_or("rope_local_base_freq", local->theta);
  if (!theta) return theta.take_error();
  c.rope_theta_local = *theta;
  return {};
}

// Routed layers (first_k_dense_replace on), optional renormalization and scaling, shared
// experts. DeepSeek-V2: softmax scores and a plain top-k ("greedy"; its grouped top-k is
// refused, naming the setting). DeepSeek-V3: sigmoid scores with a correction bias, picked
// within the topk_group best of n_group groups.
Status deepseek2_experts_from_hf(const load::HfConfig& hf, ModelConfig& c) {
  Result<int64_t> dense = hf.get_int_or("first_k_dense_replace", 0);
  Result<int64_t> experts = hf.get_int_or("n_routed_experts", 0);
  if (!dense) return dense.take_error();
  if (!experts) return experts.take_error();
  if (*dense >= c.n_layers || *experts == 0) return {};  // every layer dense
  Status s = read_ints(hf, {{"num_experts_per_tok", &c.n_experts_used}, {"moe_intermediate_size", &c.expert_hidden_dim}});
  if (!s) return s;
  Result<int64_t> shared = hf.get_int_or("n_shared_experts", 0);
  if (!shared) return shared.take_error();
  if (c.expert_sigmoid) {
    s = read_ints(hf, {{"n_group", &c.expert_groups}, {"topk_group", &c.expert_groups_used}});
    if (!s) return s;
  }
  for (const char* key : {"topk_method", "scoring_func"}) {
    if (c.expert_sigmoid) break;  // V3's configs name neither: its routing is the one above
    if (!hf.has(key)) continue;
    Result<std::string> v = hf.get_string(key);
    if (!v) return v.take_error();
    if (*v != (std::string_view(key) == "topk_method" ? "greedy" : "softmax")) {
      return unsupported(hf.name(), ": ", key, " '", *v, "' (routed experts take softmax scores and a plain top-k so far)");
    }
  }
  Result<bool> norm = hf.get_bool_or("norm_topk_prob", false);
  if (!norm) return norm.take_error();
  Result<double> scale = hf.get_float_or("routed_scaling_factor", 1.0);
  if (!scale) return scale.take_error();
  c.n_experts = *experts;
  c.n_shared_experts = *shared;
  c.expert_layers.assign(static_cast<size_t>(c.n_layers), true);
  for (int64_t l = 0; l < *dense; ++l) c.expert_layers[static_cast<size_t>(l)] = false;
  c.expert_weights_norm = *norm;
  c.expert_weights_scale = *scale;
  return {};
}

Status deepseek2_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = llama_like_config(hf, c);
  if (!s) return s;
  s = read_ints(hf, {{"kv_lora_rank", &c.kv_lora_rank}, {"qk_nope_head_dim", &c.qk_nope_dim},
                     {"qk_rope_head_dim", &c.qk_rope_dim}, {"v_head_dim", &c.v_head_dim}});
  if (!s) return s;
  Result<int64_t> q_lora = hf.get_int_or("q_lora_rank", 0);
  if (!q_lora) return q_lora.take_error();
  c.q_lora_rank = *q_lora;
  s = deepseek2_experts_from_hf(hf, c);
  if (!s) return s;
  s = activation_from_hf(hf, c, "hidden_act", "silu", false);
  if (!s) return s;
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
  c.rope_layout = ir::ops::RopeLayout::kInterleaved;  // DeepSeek rotates adjacent pairs
  c.rope_inv_freq.clear();
  c.rotary_dim = 0;
  return rope_from_hf(hf, c, c.qk_rope_dim);
}

// DeepSeek-V3: V2's layout; its routed layers pick by sigmoid scores in groups (above).
Status deepseek3_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  c.expert_sigmoid = true;
  return deepseek2_hf_config(hf, c);
}

// DeepSeek-V3.2: V3 with a sparse-attention indexer in every layer.
Status deepseek32_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = deepseek3_hf_config(hf, c);
  if (!s) return s;
  return read_ints(hf, {{"index_topk", &c.index_topk}, {"index_n_heads", &c.index_heads},
                        {"index_head_dim", &c.index_head_dim}});
}

Status gpt2_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = read_ints(hf, {{"n_embd", &c.dim}, {"n_layer", &c.n_layers}, {"n_head", &c.n_heads},
                            {"n_positions", &c.context}, {"vocab_size", &c.vocab}});
  if (!s) return s;
  Result<int64_t> inner = hf.get_int_or("n_inner", 4 * c.dim);
  if (!inner) return inner.take_error();
  Result<double> eps = hf.get_float_or("layer_norm_epsilon", 1e-5);
  if (!eps) return eps.take_error();
  c.hidden_dim = *inner;
  c.norm_eps = *eps;
  s = activation_from_hf(hf, c, "activation_function", "gelu_new", true);
  if (!s) return s;
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  return {};
}

Status bloom_hf_config(const load::HfConfig& hf, ModelConfig& c) {
  Status s = read_ints(hf, {{"hidden_size", &c.dim}, {"n_layer", &c.n_layers}, {"n_head", &c.n_heads},
                            {"vocab_size", &c.vocab}});
  if (!s) return s;
  Result<double> eps = hf.get_float_or("layer_norm_epsilon", 1e-5);
  if (!eps) return eps.take_error();
  c.norm_eps = *eps;
  c.hidden_dim = 4 * c.dim;
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.context = 1 << 20;  // ALiBi has no position table; the KV capacity is the bound
  return {};
}

}  // namespace kvf::models
