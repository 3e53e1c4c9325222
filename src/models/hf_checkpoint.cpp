// HF directory loading: config.json -> ModelConfig per model_type, HF names -> kvforge names.
#include "models/hf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "load/hf_config.h"
#include "load/safetensors.h"
#include "load/vocab_readers.h"

namespace kvf::models {
namespace {

namespace fs = std::filesystem;

// How a tensor is stored in HF relative to kvforge's layout.
enum class Fix {
  kNone,
  kTranspose,  // GPT-2's Conv1D keeps [in, out]
  kBloomQkv,   // BLOOM interleaves q/k/v per head: [H, 3, hd, ...] -> [3, H, hd, ...]
};

struct NameRule {
  const char* hf;     // suffix after the layer prefix, or a whole global name
  const char* ours;   // kvforge name (after "blk.N." for layer rules)
  Fix fix = Fix::kNone;
};

struct FamilyNames {
  const char* layer_prefix;  // "model.layers." or "transformer.h."
  std::vector<NameRule> layer;
  std::vector<NameRule> global;
};

const FamilyNames kLlamaNames{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
     {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"self_attn.q_proj.bias", "attn_q.bias"}, {"self_attn.k_proj.bias", "attn_k.bias"},
     {"self_attn.v_proj.bias", "attn_v.bias"},
     {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kGemma2Names{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
     {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"post_attention_layernorm.weight", "post_attention_norm.weight"},
     {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
     {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kDeepseek2Names{
    "model.layers.",
    {{"input_layernorm.weight", "attn_norm.weight"},
     {"self_attn.q_proj.weight", "attn_q.weight"},
     {"self_attn.q_a_proj.weight", "attn_q_a.weight"}, {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
     {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
     {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
     {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
     {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"},
     {"mlp.gate_proj.weight", "ffn_gate.weight"}, {"mlp.up_proj.weight", "ffn_up.weight"},
     {"mlp.down_proj.weight", "ffn_down.weight"}},
    {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kGpt2Names{
    "transformer.h.",
    {{"ln_1.weight", "attn_norm.weight"}, {"ln_1.bias", "attn_norm.bias"},
     {"attn.c_attn.weight", "attn_qkv.weight", Fix::kTranspose}, {"attn.c_attn.bias", "attn_qkv.bias"},
     {"attn.c_proj.weight", "attn_output.weight", Fix::kTranspose}, {"attn.c_proj.bias", "attn_output.bias"},
     {"ln_2.weight", "ffn_norm.weight"}, {"ln_2.bias", "ffn_norm.bias"},
     {"mlp.c_fc.weight", "ffn_up.weight", Fix::kTranspose}, {"mlp.c_fc.bias", "ffn_up.bias"},
     {"mlp.c_proj.weight", "ffn_down.weight", Fix::kTranspose}, {"mlp.c_proj.bias", "ffn_down.bias"}},
    {{"transformer.wte.weight", "token_embd.weight"}, {"transformer.wpe.weight", "position_embd.weight"},
     {"transformer.ln_f.weight", "output_norm.weight"}, {"transformer.ln_f.bias", "output_norm.bias"},
     {"lm_head.weight", "output.weight"}}};

const FamilyNames kBloomNames{
    "transformer.h.",
    {{"input_layernorm.weight", "attn_norm.weight"}, {"input_layernorm.bias", "attn_norm.bias"},
     {"self_attention.query_key_value.weight", "attn_qkv.weight", Fix::kBloomQkv},
     {"self_attention.query_key_value.bias", "attn_qkv.bias", Fix::kBloomQkv},
     {"self_attention.dense.weight", "attn_output.weight"}, {"self_attention.dense.bias", "attn_output.bias"},
     {"post_attention_layernorm.weight", "ffn_norm.weight"}, {"post_attention_layernorm.bias", "ffn_norm.bias"},
     {"mlp.dense_h_to_4h.weight", "ffn_up.weight"}, {"mlp.dense_h_to_4h.bias", "ffn_up.bias"},
     {"mlp.dense_4h_to_h.weight", "ffn_down.weight"}, {"mlp.dense_4h_to_h.bias", "ffn_down.bias"}},
    {{"transformer.word_embeddings.weight", "token_embd.weight"},
     {"transformer.word_embeddings_layernorm.weight", "token_embd_norm.weight"},
     {"transformer.word_embeddings_layernorm.bias", "token_embd_norm.bias"},
     {"transformer.ln_f.weight", "output_norm.weight"}, {"transformer.ln_f.bias", "output_norm.bias"},
     {"lm_head.weight", "output.weight"}}};

// Buffers some checkpoints carry that are not weights.
bool ignorable(const std::string& name) {
  return name.ends_with("rotary_emb.inv_freq") || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

Result<HostTensor> apply_fix(HostTensor t, Fix fix, int64_t n_heads) {
  if (fix == Fix::kNone) return t;
  if (fix == Fix::kTranspose) {
    if (t.rank() != 2) return invalid_input("expected a matrix, got ", shape_str(t.shape()));
    Result<HostTensor> p = t.permute({1, 0});
    if (!p) return p;
    return p->contiguous();
  }
  // kBloomQkv: rows are (head, q|k|v, hd); regroup as (q|k|v, head, hd).
  const int64_t rows = t.shape()[0], hd = rows / (3 * n_heads);
  if (hd * 3 * n_heads != rows) return invalid_input("fused qkv of ", rows, " rows for ", n_heads, " heads");
  Shape split{n_heads, 3, hd};
  if (t.rank() == 2) split.push_back(t.shape()[1]);
  Result<HostTensor> r = t.reshape(split);
  if (!r) return r;
  std::vector<int64_t> perm{1, 0, 2};
  if (t.rank() == 2) perm.push_back(3);
  Result<HostTensor> p = r->permute(perm);
  if (!p) return p;
  Result<HostTensor> c = p->contiguous();
  if (!c) return c;
  return c->reshape(t.shape());
}

// Maps one HF tensor name to kvforge's, or "" when the family does not use it.
std::pair<std::string, Fix> map_name(const FamilyNames& names, const std::string& hf) {
  for (const NameRule& r : names.global) {
    if (hf == r.hf) return {r.ours, r.fix};
  }
  if (!hf.starts_with(names.layer_prefix)) return {"", Fix::kNone};
  const std::string rest = hf.substr(std::strlen(names.layer_prefix));
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || rest.find_first_not_of("0123456789") != dot) return {"", Fix::kNone};
  const std::string layer = rest.substr(0, dot), suffix = rest.substr(dot + 1);
  for (const NameRule& r : names.layer) {
    if (suffix == r.hf) return {str_cat("blk.", layer, ".", r.ours), r.fix};
  }
  return {"", Fix::kNone};
}

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

Status family_config(const load::HfConfig& hf, ModelConfig& c) {
  const std::string& t = hf.model_type();
  if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3") {
    c.arch = t;
    Status s = llama_like_config(hf, c);
    if (!s) return s;
    c.qk_norm = t == "qwen3";
    s = activation_from_hf(hf, c, "hidden_act", "silu", false);
    if (!s) return s;
    return sliding_from_hf(hf, c, false);
  }
  if (t == "gemma2") {
    c.arch = t;
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
  if (t == "deepseek_v2") {
    c.arch = "deepseek2";
    Status s = llama_like_config(hf, c);
    if (!s) return s;
    s = read_ints(hf, {{"kv_lora_rank", &c.kv_lora_rank}, {"qk_nope_head_dim", &c.qk_nope_dim},
                       {"qk_rope_head_dim", &c.qk_rope_dim}, {"v_head_dim", &c.v_head_dim}});
    if (!s) return s;
    Result<int64_t> q_lora = hf.get_int_or("q_lora_rank", 0);
    if (!q_lora) return q_lora.take_error();
    c.q_lora_rank = *q_lora;
    Result<int64_t> dense = hf.get_int_or("first_k_dense_replace", 0);
    if (!dense) return dense.take_error();
    if (*dense < c.n_layers) {
      return unsupported(hf.name(), ": routed-MoE layers (first_k_dense_replace ", *dense, " < ", c.n_layers,
                         " layers) are not supported yet");
    }
    s = activation_from_hf(hf, c, "hidden_act", "silu", false);
    if (!s) return s;
    c.n_kv_heads = c.n_heads;
    c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
    c.rope_layout = ir::ops::RopeLayout::kInterleaved;  // DeepSeek rotates adjacent pairs
    c.rope_inv_freq.clear();
    c.rotary_dim = 0;
    return rope_from_hf(hf, c, c.qk_rope_dim);
  }
  if (t == "gpt2") {
    c.arch = t;
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
  if (t == "bloom") {
    c.arch = t;
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
  return unsupported(hf.name(), ": model_type '", t,
                     "' is not supported (kvforge knows: llama, mistral, qwen2, qwen3, gemma2, gpt2, bloom, deepseek_v2)");
}

// A special token id: an integer, the first of a list (Llama 3 lists several eos ids), or -1.
int32_t special_id(const load::HfConfig& hf, const char* key) {
  if (!hf.has(key)) return -1;
  Result<int64_t> one = hf.get_int(key);
  if (one.ok()) return static_cast<int32_t>(*one);
  Result<std::vector<int64_t>> many = hf.get_ints(key);
  return many.ok() && !many->empty() ? static_cast<int32_t>(many->front()) : -1;
}

const FamilyNames& names_for(const std::string& arch) {
  if (arch == "gemma2") return kGemma2Names;
  if (arch == "deepseek2") return kDeepseek2Names;
  if (arch == "gpt2") return kGpt2Names;
  if (arch == "bloom") return kBloomNames;
  return kLlamaNames;
}

Status load_weights(const load::SafetensorsSet& st, const ModelConfig& c, Weights& w) {
  const FamilyNames& names = names_for(c.arch);
  for (const std::string& hf : st.names()) {
    if (ignorable(hf)) continue;
    auto [ours, fix] = map_name(names, hf);
    if (ours.empty()) return unsupported(st.path(), ": tensor ", hf, " is not used by kvforge's ", c.arch, " family");
    Result<HostTensor> t = st.tensor(hf);
    if (!t) return t.take_error();
    Result<HostTensor> fixed = apply_fix(std::move(*t), fix, c.n_heads);
    if (!fixed) return fixed.take_error().context(st.path(), ": tensor ", hf);
    w.add(ours, std::move(*fixed));
  }
  return {};
}

}  // namespace

Result<Model> open_hf(const std::string& dir, const OpenOptions& opts) {
  const fs::path root(dir);
  Result<load::HfConfig> hf = load::read_hf_config((root / "config.json").string());
  if (!hf) return hf.take_error();
  Model m;
  m.source = dir;
  Status s = family_config(*hf, m.config);
  if (!s) return s.take_error();
  m.config.bos = special_id(*hf, "bos_token_id");
  m.config.eos = special_id(*hf, "eos_token_id");
  Result<load::SafetensorsSet> st = load::open_safetensors(dir);
  if (!st) return st.take_error();
  m.weights = Weights(dir);
  s = load_weights(*st, m.config, m.weights);
  if (!s) return s.take_error();
  m.config.tie_embeddings = !m.weights.has("output.weight");
  m.config.attn_bias = m.weights.has("blk.0.attn_q.bias");
  if (m.weights.has("token_embd.weight")) {
    // Embeddings padded past the vocabulary are common; a vocabulary past the embeddings has
    // tokens with no row.
    const int64_t rows = m.weights.tensors().at("token_embd.weight").shape()[0];
    if (m.config.vocab > rows) {
      return invalid_input(dir, ": config.json vocab_size ", m.config.vocab, " exceeds the ", rows,
                           " rows of token_embd.weight");
    }
    m.config.vocab = rows;
  }
  const fs::path tok = root / "tokenizer.json";
  std::error_code ec;
  if (opts.with_tokenizer && fs::is_regular_file(tok, ec)) {
    Result<load::Vocab> v = load::read_hf_tokenizer(tok.string());
    if (!v) return v.take_error();
    Result<std::unique_ptr<load::Tokenizer>> t = load::Tokenizer::create(std::move(*v));
    if (!t) return t.take_error().context(tok.string());
    m.tokenizer = std::move(*t);
  }
  return m;
}

}  // namespace kvf::models
