// The GGUF codecs of the llama-like families (llama, qwen2/3, their MoE forms, phi3) and of
// gpt2 and bloom. Keys are "<architecture>.<key>", with the types llama.cpp's loader checks
// (counts u32, scales f32).
#include "models/gguf_codec.h"

#include <algorithm>
#include <utility>

#include "load/gguf.h"
#include "load/gguf_writer.h"
#include "models/gguf_keys.h"
#include "models/gguf_names.h"
#include "models/hf_names.h"

namespace kvf::models {

// Integer keys that must be present, read in order.
Status read_required(const load::GgufFile& f, const std::string& arch,
                     std::initializer_list<std::pair<const char*, int64_t*>> keys) {
  for (const auto& [k, out] : keys) {
    Result<int64_t> v = f.get_int(str_cat(arch, ".", k));
    if (!v) return v.take_error();
    *out = *v;
  }
  return {};
}

Status read_llama_like(const load::GgufFile& f, const std::string& arch, ir::ops::RopeLayout layout, ModelConfig& c) {
  auto key = [&](const char* k) { return str_cat(arch, ".", k); };
  Status s = read_required(f, arch, {{"embedding_length", &c.dim}, {"block_count", &c.n_layers},
                                     {"feed_forward_length", &c.hidden_dim}, {"attention.head_count", &c.n_heads}});
  if (!s) return s;
  c.n_kv_heads = f.get_int_or(key("attention.head_count_kv"), c.n_heads);
  c.head_dim = f.get_int_or(key("attention.key_length"), c.n_heads > 0 ? c.dim / c.n_heads : 0);
  c.context = f.get_int_or(key("context_length"), 2048);
  c.norm_eps = f.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5);
  c.rope_theta = f.get_float_or(key("rope.freq_base"), 10000.0);
  const int64_t rot = f.get_int_or(key("rope.dimension_count"), c.head_dim);
  c.rotary_dim = rot == c.head_dim ? 0 : rot;
  c.rope_layout = layout;
  c.sliding_window = f.get_int_or(key("attention.sliding_window"), 0);
  return {};
}

void write_llama_like(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) {
  w.set_u32(arch + ".context_length", u32(c.context));
  w.set_u32(arch + ".embedding_length", u32(c.dim));
  w.set_u32(arch + ".block_count", u32(c.n_layers));
  w.set_u32(arch + ".feed_forward_length", u32(c.hidden_dim));
  w.set_u32(arch + ".attention.head_count", u32(c.n_heads));
  w.set_u32(arch + ".attention.head_count_kv", u32(c.n_kv_heads));
  w.set_u32(arch + ".attention.key_length", u32(c.head_dim));
  w.set_u32(arch + ".attention.value_length", u32(c.head_dim));
  w.set_u32(arch + ".rope.dimension_count", u32(c.rotary_dim > 0 ? c.rotary_dim : c.head_dim));
  w.set_f32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  if (c.n_experts > 0) {
    w.set_u32(arch + ".expert_count", u32(c.n_experts));
    w.set_u32(arch + ".expert_used_count", u32(c.n_experts_used));
    w.set_u32(arch + ".expert_feed_forward_length", u32(c.expert_hidden_dim));
  }
}

namespace {

// Routed experts in every layer, as llama.cpp's llama, qwen3moe and qwen2moe run them.
Status read_experts(const load::GgufFile& f, const std::string& arch, ModelConfig& c, const char* width_key) {
  Status s = read_required(f, arch, {{"expert_count", &c.n_experts}, {"expert_used_count", &c.n_experts_used},
                                     {width_key, &c.expert_hidden_dim}});
  if (!s) return s;
  c.expert_layers.assign(static_cast<size_t>(std::max<int64_t>(c.n_layers, 0)), true);
  return {};
}

// llama, mistral and mixtral (llama with experts: feed_forward_length is each expert's width,
// the top-k weights renormalized).
Status read_llama(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_llama_like(f, arch, ir::ops::RopeLayout::kInterleaved, c);
  if (!s || !f.find(str_cat(arch, ".expert_count"))) return s;
  s = read_experts(f, arch, c, "feed_forward_length");
  c.expert_weights_norm = true;
  return s;
}

Status read_qwen(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  return read_llama_like(f, arch, ir::ops::RopeLayout::kHalf, c);
}

Status read_qwen3moe(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_qwen(f, arch, c);
  if (s) s = read_experts(f, arch, c, "expert_feed_forward_length");
  c.expert_weights_norm = true;
  return s;
}

// ---- what each architecture can express ---------------------------------------------------------

// Unscaled rope, over whole heads unless partial_rotary_ok; no sliding window.
Status check_plain_attention(const ModelConfig& c, bool partial_rotary_ok) {
  if (!c.rope_inv_freq.empty()) return unsupported("GGUF export: ", c.arch, " with scaled rope frequencies");
  if (c.rotary_dim != 0 && !partial_rotary_ok) return unsupported("GGUF export: ", c.arch, " with a partial rotary dimension");
  if (c.sliding_window > 0) return unsupported("GGUF export: ", c.arch, " with a sliding window (llama.cpp's ", c.arch, " has none)");
  return {};
}

// The rotate-half (NEOX) families' GGUF keeps HF's layout: pairs cannot be written back.
Status check_rotate_half(const ModelConfig& c, bool partial_rotary_ok) {
  if (c.rope_layout != ir::ops::RopeLayout::kHalf) return unsupported("GGUF export: ", c.arch, " with interleaved rope pairs (its GGUF keeps rotate-half)");
  return check_plain_attention(c, partial_rotary_ok);
}

// MoE as llama.cpp's llama and qwen3moe run it: every layer routed, a renormalized softmax
// top-k, no shared experts, no scale.
Status check_plain_experts(const ModelConfig& c) {
  if (c.n_experts == 0) return {};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (!c.routed(l)) return unsupported("GGUF export: ", c.arch, " layer ", l, " is dense (llama.cpp routes every layer)");
  }
  if (c.n_shared_experts > 0 || c.expert_sigmoid || !c.expert_weights_norm || c.expert_weights_scale != 1.0) {
    return unsupported("GGUF export: ", c.arch, " routing other than a renormalized softmax top-k without shared experts");
  }
  return {};
}

Status check_llama(const ModelConfig& c) {
  Status s = check_plain_attention(c, false);
  if (s && (c.attn_bias || c.qk_norm)) s = unsupported("GGUF export: llama.cpp's llama has no q/k/v biases or q/k norms");
  if (s && c.n_experts > 0 && c.expert_hidden_dim != c.hidden_dim) {
    s = unsupported("GGUF export: llama with experts whose width differs from feed_forward_length");
  }
  if (!s) return s;
  return check_plain_experts(c);
}

Status check_qwen(const ModelConfig& c) {
  Status s = check_rotate_half(c, false);
  if (s && c.n_experts > 0) s = unsupported("GGUF export: ", c.arch, " with experts");
  return s;
}

Status check_qwen3moe(const ModelConfig& c) {
  Status s = check_rotate_half(c, false);
  if (s && (c.n_experts == 0 || !c.qk_norm)) s = unsupported("GGUF export: qwen3moe needs experts and q/k norms");
  if (!s) return s;
  return check_plain_experts(c);
}

// ---- tensor layouts -----------------------------------------------------------------------------

// Each head's rows [a, b] of a [heads * a * b, cols] matrix reordered as [b, a].
Result<HostTensor> swap_head_rows(const HostTensor& t, int64_t heads, int64_t a, int64_t b) {
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  Result<HostTensor> r = t.reshape({heads, a, b, cols});
  if (!r) return r;
  Result<HostTensor> p = r->permute({0, 2, 1, 3});
  if (!p) return p;
  Result<HostTensor> c = p->contiguous();
  if (!c) return c;
  return c->reshape({rows, cols});
}

// GGUF llama wants q/k rows in adjacent rope pairs; HF stores each head as two halves.
// Rows [heads, 2, hd/2] become [heads, hd/2, 2] (llama.cpp's converter does the same), and back.
Result<HostTensor> halves_to_pairs(const HostTensor& t, int64_t heads) {
  return swap_head_rows(t, heads, 2, t.shape()[0] / heads / 2);
}
Result<HostTensor> pairs_to_halves(const HostTensor& t, int64_t heads) {
  return swap_head_rows(t, heads, t.shape()[0] / heads / 2, 2);
}

// q/k rows of a llama GGUF (pairs) for a model that keeps rotate-half rows (read from HF);
// a model read from GGUF keeps the pairs and rotates them as pairs.
Result<HostTensor> llama_rows_to_model(const ModelConfig& c, const std::string& name, const HostTensor& t) {
  const bool q = name.ends_with("attn_q.weight"), k = name.ends_with("attn_k.weight");
  if (c.rope_layout == ir::ops::RopeLayout::kInterleaved || (!q && !k)) return t;
  return pairs_to_halves(t, q ? c.n_heads : c.n_kv_heads);
}

// q/k rows as HF lays them (halves) for a model that keeps pairs (read from a llama GGUF).
Result<HostTensor> llama_hf_rows_to_model(const ModelConfig& c, const std::string& name, const HostTensor& t) {
  const bool q = name.ends_with("attn_q.weight"), k = name.ends_with("attn_k.weight");
  if (c.rope_layout != ir::ops::RopeLayout::kInterleaved || (!q && !k)) return t;
  return halves_to_pairs(t, q ? c.n_heads : c.n_kv_heads);
}

// A model read from HF keeps rotate-half q/k rows; its llama GGUF wants them in pairs.
Result<Weights> llama_to_gguf(const ModelConfig& c, const Weights& w) {
  if (c.rope_layout == ir::ops::RopeLayout::kInterleaved) return w;
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    const bool q = name.ends_with("attn_q.weight"), k = name.ends_with("attn_k.weight");
    Result<HostTensor> laid = q || k ? halves_to_pairs(t, q ? c.n_heads : c.n_kv_heads) : Result<HostTensor>(t);
    if (!laid) return laid.take_error().context("tensor ", name);
    out.add(name, std::move(*laid));
  }
  return out;
}

// The layers' [gate; up] rows of phi3's fused ffn_up, cut into kvforge's ffn_gate and ffn_up.
Status phi3_to_model(ModelConfig& c, Weights& w) {
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    if (!name.starts_with("blk.") || !(name.ends_with(".ffn_up.weight") || name.ends_with(".attn_qkv.weight"))) {
      out.add(name, t);
      continue;
    }
    const bool qkv = name.ends_with(".attn_qkv.weight");
    const std::string fused = qkv ? name : name.substr(0, name.size() - std::string("ffn_up.weight").size()) + "ffn_gate_up.weight";
    Result<std::vector<std::pair<std::string, HostTensor>>> parts =
        split_fused(fused, t, qkv ? Fix::kSplitQkv : Fix::kSplitGateUp, c.n_heads * c.head_dim, c.kv_dim());
    if (!parts) return parts.take_error().context("tensor ", name);
    for (auto& [part, tensor] : *parts) out.add(part, std::move(tensor));
  }
  w = std::move(out);
  return {};
}

// kvforge's ffn_gate and ffn_up of a layer as phi3's one ffn_up of [gate; up] rows.
Result<Weights> phi3_to_gguf(const ModelConfig&, const Weights& w) {
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    if (name.starts_with("blk.") && name.ends_with(".ffn_gate.weight")) continue;
    if (!name.starts_with("blk.") || !name.ends_with(".ffn_up.weight")) {
      out.add(name, t);
      continue;
    }
    const std::string gate_name = name.substr(0, name.size() - std::string("up.weight").size()) + "gate.weight";
    const auto gate = w.tensors().find(gate_name);
    if (gate == w.tensors().end()) return invalid_input("GGUF export: ", name, " without ", gate_name);
    const HostTensor parts[] = {gate->second, t};
    Result<HostTensor> both = stack(parts);
    if (both) both = both->reshape({2 * t.shape()[0], t.shape()[1]});
    if (!both) return both.take_error().context("tensor ", name);
    out.add(name, std::move(*both));
  }
  return out;
}

// llama.cpp's qwen2moe: qwen2's attention, every layer routed by softmax top-k without
// renormalization, and one shared expert gated by sigmoid(x · ffn_gate_inp_shexp).
Status read_qwen2moe(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_qwen(f, arch, c);
  if (s) s = read_experts(f, arch, c, "expert_feed_forward_length");
  if (s) s = read_required(f, arch, {{"expert_shared_feed_forward_length", &c.shared_expert_hidden_dim}});
  if (!s) return s;
  c.expert_weights_norm = false;
  c.n_shared_experts = 1;
  c.shared_expert_gated = true;
  return {};
}

// The shared expert's gate as kvforge traces it, [1, dim] (a converter may store it 1-D).
Status qwen2moe_to_model(ModelConfig& c, Weights& w) {
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    Result<HostTensor> laid = t;
    if (name.ends_with("ffn_gate_inp_shexp.weight") && t.rank() == 1) laid = t.reshape({1, c.dim});
    if (!laid) return laid.take_error().context("tensor ", name);
    out.add(name, std::move(*laid));
  }
  w = std::move(out);
  return {};
}

Status check_qwen2moe(const ModelConfig& c) {
  Status s = check_rotate_half(c, false);
  if (!s) return s;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (!c.routed(l)) return unsupported("GGUF export: qwen2moe layer ", l, " is dense (llama.cpp routes every layer)");
  }
  if (c.expert_weights_norm || c.expert_sigmoid || c.expert_weights_scale != 1.0 || c.n_shared_experts != 1 ||
      !c.shared_expert_gated) {
    return unsupported("GGUF export: qwen2moe routing other than softmax top-k, unnormalized, with one gated shared expert");
  }
  return {};
}

void write_qwen2moe(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) {
  write_llama_like(c, arch, w);
  w.set_u32(arch + ".expert_shared_feed_forward_length", u32(c.shared_expert_hidden_dim));
}

// llama.cpp's qwen2moe needs output.weight even when the head is tied.
Result<Weights> qwen2moe_to_gguf(const ModelConfig& c, const Weights& w) {
  if (!c.tie_embeddings || w.has("output.weight")) return w;
  Weights out = w;
  out.add("output.weight", w.tensors().at("token_embd.weight"));
  return out;
}

Status read_phi3(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_qwen(f, arch, c);
  c.sliding_window = 0;  // llama.cpp runs phi3 without its window
  return s;
}

Status check_phi3(const ModelConfig& c) {
  Status s = check_rotate_half(c, true);
  if (s && (c.attn_bias || c.qk_norm || c.n_experts > 0)) s = unsupported("GGUF export: phi3 with biases, q/k norms or experts");
  return s;
}

// ---- gpt2 and bloom: LayerNorm with biases, tanh GELU, no rope ----------------------------------

Status read_layernorm_family(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_required(f, arch, {{"embedding_length", &c.dim}, {"block_count", &c.n_layers},
                                     {"feed_forward_length", &c.hidden_dim}, {"attention.head_count", &c.n_heads}});
  if (!s) return s;
  c.n_kv_heads = f.get_int_or(str_cat(arch, ".attention.head_count_kv"), c.n_heads);
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.norm_eps = f.get_float_or(str_cat(arch, ".attention.layer_norm_epsilon"), 1e-5);
  c.gelu_tanh = true;  // llama.cpp's gpt2 and bloom use the tanh form
  return {};
}

Status read_gpt2(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_layernorm_family(f, arch, c);
  if (!s) return s;
  Result<int64_t> ctx = f.get_int(arch + ".context_length");  // the position table's rows
  if (!ctx) return ctx.take_error();
  c.context = *ctx;
  return {};
}

Status read_bloom(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_layernorm_family(f, arch, c);
  c.context = 1 << 20;  // ALiBi has no position table; the KV capacity is the bound
  return s;
}

void write_layernorm_family(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) {
  // bloom has no trained length: what llama.cpp's converter writes without seq_length.
  w.set_u32(arch + ".context_length", u32(c.learned_positions ? c.context : std::min<int64_t>(c.context, 2048)));
  w.set_u32(arch + ".embedding_length", u32(c.dim));
  w.set_u32(arch + ".block_count", u32(c.n_layers));
  w.set_u32(arch + ".feed_forward_length", u32(c.hidden_dim));
  w.set_u32(arch + ".attention.head_count", u32(c.n_heads));
  w.set_u32(arch + ".attention.head_count_kv", u32(c.n_kv_heads));
  w.set_f32(arch + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
}

Status check_layernorm_family(const ModelConfig& c) {
  if (!c.gelu_tanh) return unsupported("GGUF export: ", c.arch, " with the erf GELU (llama.cpp's ", c.arch, " uses the tanh form)");
  if (c.n_kv_heads != c.n_heads || c.head_dim * c.n_heads != c.dim) return unsupported("GGUF export: ", c.arch, " with grouped or resized heads");
  return {};
}

}  // namespace

const GgufCodec kLlamaGguf{.read_config = read_llama, .check_export = check_llama, .write_config = write_llama_like,
                           .to_gguf = llama_to_gguf, .rows_to_model = llama_rows_to_model,
                           .hf_rows_to_model = llama_hf_rows_to_model};
const GgufCodec kQwenGguf{.read_config = read_qwen, .check_export = check_qwen, .write_config = write_llama_like};
const GgufCodec kQwen3MoeGguf{.read_config = read_qwen3moe, .check_export = check_qwen3moe, .write_config = write_llama_like};
const GgufCodec kQwen2MoeGguf{.read_config = read_qwen2moe, .to_model = qwen2moe_to_model, .check_export = check_qwen2moe,
                              .write_config = write_qwen2moe, .to_gguf = qwen2moe_to_gguf};
const GgufCodec kPhi3Gguf{.read_config = read_phi3, .to_model = phi3_to_model, .check_export = check_phi3,
                          .write_config = write_llama_like, .to_gguf = phi3_to_gguf};
const GgufCodec kGpt2Gguf{.read_config = read_gpt2, .check_export = check_layernorm_family,
                          .write_config = write_layernorm_family};
const GgufCodec kBloomGguf{.read_config = read_bloom, .check_export = check_layernorm_family,
                           .write_config = write_layernorm_family};

}  // namespace kvf::models
