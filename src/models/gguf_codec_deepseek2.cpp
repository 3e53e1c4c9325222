// The GGUF codec of deepseek2, llama.cpp's one architecture for DeepSeek-V2 and -V3 (and so
// for kvforge's deepseek2 and deepseek3 families: V3's sigmoid routing is a key there), and
// of deepseek32 (V3.2: the same with the sparse-attention indexer's keys).
// Multi-head latent attention keeps its latent up-projection either as kvforge does, one
// attn_kv_b of [H * (nope + dv), kv_lora_rank] rows (what kvforge writes; llama.cpp reads it
// when the *_mla key lengths are absent), or split per head as llama.cpp's converter now
// writes it: attn_k_b [H, kv_lora_rank, nope] (transposed) and attn_v_b [H, dv, kv_lora_rank],
// rejoined on read. The rope part rotates adjacent pairs in both.
#include <cstring>

#include "models/gguf_codec.h"
#include "models/gguf_keys.h"

namespace kvf::models {
namespace {

constexpr int64_t kGatingSoftmax = 1, kGatingSigmoid = 2;  // llama.cpp's expert_gating_func

Status read_deepseek2_experts(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  auto key = [&](const char* k) { return str_cat(arch, ".", k); };
  c.n_experts = f.get_int_or(key("expert_count"), 0);
  const int64_t dense = f.get_int_or(key("leading_dense_block_count"), 0);
  if (c.n_experts == 0 || dense >= c.n_layers) {
    c.n_experts = 0;
    return {};
  }
  Status s = read_required(f, arch, {{"expert_used_count", &c.n_experts_used},
                                     {"expert_feed_forward_length", &c.expert_hidden_dim},
                                     {"expert_shared_count", &c.n_shared_experts}});
  if (!s) return s;
  c.expert_layers.assign(static_cast<size_t>(c.n_layers), true);
  for (int64_t l = 0; l < dense; ++l) c.expert_layers[static_cast<size_t>(l)] = false;
  const double scale = f.get_float_or(key("expert_weights_scale"), 1.0);
  c.expert_weights_scale = scale == 0.0 ? 1.0 : scale;  // llama.cpp: 0 means none
  if (f.find(key("expert_weights_norm"))) {
    Result<bool> norm = f.get_bool(key("expert_weights_norm"));
    if (!norm) return norm.take_error();
    c.expert_weights_norm = *norm;
  }
  const int64_t gating = f.get_int_or(key("expert_gating_func"), kGatingSoftmax);
  if (gating != kGatingSoftmax && gating != kGatingSigmoid) {
    return unsupported(f.path, ": ", key("expert_gating_func"), " = ", gating, " (softmax 1 and sigmoid 2 are known)");
  }
  c.expert_sigmoid = gating == kGatingSigmoid;
  c.expert_groups = f.get_int_or(key("expert_group_count"), 1);
  c.expert_groups_used = f.get_int_or(key("expert_group_used_count"), 1);
  return {};
}

Status read_deepseek2(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_llama_like(f, arch, ir::ops::RopeLayout::kInterleaved, c);
  if (!s) return s;
  auto key = [&](const char* k) { return str_cat(arch, ".", k); };
  if (f.find(key("rope.scaling.type"))) {
    Result<std::string> type = f.get_string(key("rope.scaling.type"));
    if (!type) return type.take_error();
    if (*type != "none") return unsupported(f.path, ": ", key("rope.scaling.type"), " '", *type, "' (deepseek2 runs unscaled rope)");
  }
  s = read_required(f, arch, {{"attention.kv_lora_rank", &c.kv_lora_rank}, {"rope.dimension_count", &c.qk_rope_dim}});
  if (!s) return s;
  c.q_lora_rank = f.get_int_or(key("attention.q_lora_rank"), 0);
  // Split latent files give the per-head sizes in the *_mla keys (their key_length is the latent's).
  const bool split = f.find(key("attention.key_length_mla")) != nullptr;
  const int64_t k_len = f.get_int_or(key(split ? "attention.key_length_mla" : "attention.key_length"), 0);
  c.v_head_dim = f.get_int_or(key(split ? "attention.value_length_mla" : "attention.value_length"), 0);
  c.qk_nope_dim = k_len - c.qk_rope_dim;
  c.head_dim = k_len;
  c.n_kv_heads = c.n_heads;
  c.rotary_dim = 0;
  return read_deepseek2_experts(f, arch, c);
}

// attn_k_b [H, r, nope] and attn_v_b [H, dv, r] of each layer rejoined as attn_kv_b
// [H * (nope + dv), r]: per head its nope rows (k_b transposed), then its dv rows.
Status deepseek2_to_model(ModelConfig& c, Weights& w) {
  const int64_t H = c.n_heads, r = c.kv_lora_rank, nope = c.qk_nope_dim, dv = c.v_head_dim;
  Weights out(w.source());
  for (const auto& [name, t] : w.tensors()) {
    if (name.ends_with(".attn_v_b.weight")) continue;
    if (!name.ends_with(".attn_k_b.weight")) {
      out.add(name, t);
      continue;
    }
    const std::string stem = name.substr(0, name.size() - std::strlen("attn_k_b.weight"));
    const auto v = w.tensors().find(stem + "attn_v_b.weight");
    if (v == w.tensors().end()) return invalid_input(name, " without ", stem, "attn_v_b.weight");
    if (t.shape() != Shape{H, r, nope} || v->second.shape() != Shape{H, dv, r}) {
      return invalid_input(stem, "attn_k_b/attn_v_b: ", shape_str(t.shape()), " and ", shape_str(v->second.shape()),
                           ", expected [", H, ", ", r, ", ", nope, "] and [", H, ", ", dv, ", ", r, "]");
    }
    Result<std::vector<float>> kb = t.to_f32();
    if (!kb) return kb.take_error().context(name);
    Result<std::vector<float>> vb = v->second.to_f32();
    if (!vb) return vb.take_error().context(v->first);
    std::vector<float> kv(static_cast<size_t>(H * (nope + dv) * r));
    for (int64_t h = 0; h < H; ++h) {
      float* head = kv.data() + h * (nope + dv) * r;
      for (int64_t i = 0; i < nope; ++i) {
        for (int64_t j = 0; j < r; ++j) head[i * r + j] = (*kb)[static_cast<size_t>((h * r + j) * nope + i)];
      }
      std::memcpy(head + nope * r, vb->data() + h * dv * r, static_cast<size_t>(dv * r) * sizeof(float));
    }
    Result<HostTensor> joined = HostTensor::from_f32({H * (nope + dv), r}, kv);
    if (!joined) return joined.take_error();
    out.add(stem + "attn_kv_b.weight", std::move(*joined));
  }
  w = std::move(out);
  return {};
}

// Routed layers exactly from leading_dense_block_count on, no gated shared expert.
Status check_deepseek2(const ModelConfig& c) {
  if (!c.rope_inv_freq.empty()) return unsupported("GGUF export: ", c.arch, " with scaled rope frequencies");
  if (c.kv_lora_rank <= 0) return unsupported("GGUF export: ", c.arch, " without a latent (kv_lora_rank)");
  if (c.sliding_window > 0 || c.shared_expert_gated) return unsupported("GGUF export: ", c.arch, " with a window or a gated shared expert");
  bool routed = false;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (routed && !c.routed(l)) return unsupported("GGUF export: ", c.arch, " layer ", l, " is dense after routed ones");
    routed = routed || c.routed(l);
  }
  return {};
}

void write_deepseek2(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) {
  write_llama_like(c, arch, w);
  w.set_u32(arch + ".attention.key_length", u32(c.qk_nope_dim + c.qk_rope_dim));
  w.set_u32(arch + ".attention.value_length", u32(c.v_head_dim));
  w.set_u32(arch + ".rope.dimension_count", u32(c.qk_rope_dim));
  w.set_u32(arch + ".attention.q_lora_rank", u32(c.q_lora_rank));  // 0: one q projection
  w.set_u32(arch + ".attention.kv_lora_rank", u32(c.kv_lora_rank));
  int64_t dense = 0;
  while (dense < c.n_layers && !c.routed(dense)) ++dense;
  w.set_u32(arch + ".leading_dense_block_count", u32(dense));
  // llama.cpp reads these two even when no layer is routed.
  w.set_u32(arch + ".expert_feed_forward_length", u32(c.expert_hidden_dim));
  w.set_u32(arch + ".expert_shared_count", u32(c.n_experts > 0 ? c.n_shared_experts : 0));
  if (c.n_experts == 0) return;
  w.set_f32(arch + ".expert_weights_scale", static_cast<float>(c.expert_weights_scale));
  w.set_bool(arch + ".expert_weights_norm", c.expert_weights_norm);
  w.set_u32(arch + ".expert_gating_func", u32(c.expert_sigmoid ? kGatingSigmoid : kGatingSoftmax));
  w.set_u32(arch + ".expert_group_count", u32(c.expert_groups));
  w.set_u32(arch + ".expert_group_used_count", u32(c.expert_groups_used));
}

// deepseek32: deepseek2's keys and the indexer's (llama.cpp's attention.indexer.*).
Status read_deepseek32(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = read_deepseek2(f, arch, c);
  if (!s) return s;
  return read_required(f, arch, {{"attention.indexer.top_k", &c.index_topk},
                                 {"attention.indexer.head_count", &c.index_heads},
                                 {"attention.indexer.key_length", &c.index_head_dim}});
}

void write_deepseek32(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) {
  write_deepseek2(c, arch, w);
  w.set_u32(arch + ".attention.indexer.top_k", u32(c.index_topk));
  w.set_u32(arch + ".attention.indexer.head_count", u32(c.index_heads));
  w.set_u32(arch + ".attention.indexer.key_length", u32(c.index_head_dim));
}

}  // namespace

const GgufCodec kDeepseek2Gguf{.read_config = read_deepseek2, .to_model = deepseek2_to_model,
                               .check_export = check_deepseek2, .write_config = write_deepseek2};
const GgufCodec kDeepseek32Gguf{.read_config = read_deepseek32, .to_model = deepseek2_to_model,
                                .check_export = check_deepseek2, .write_config = write_deepseek32};

}  // namespace kvf::models
