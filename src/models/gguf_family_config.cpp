#include "models/gguf_family_config.h"

#include <algorithm>
#include <utility>

namespace kvf::models {
namespace {

Status llama_like_gguf_config(const load::GgufFile& f, const std::string& arch, ir::ops::RopeLayout layout,
                              ModelConfig& c) {
  auto key = [&](const char* k) { return str_cat(arch, ".", k); };
  const std::pair<const char*, int64_t*> required[] = {{"embedding_length", &c.dim},
                                                       {"block_count", &c.n_layers},
                                                       {"feed_forward_length", &c.hidden_dim},
                                                       {"attention.head_count", &c.n_heads}};
  for (const auto& [k, out] : required) {
    Result<int64_t> v = f.get_int(key(k));
    if (!v) return v.take_error();
    *out = *v;
  }
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

}  // namespace

Status llama_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  return llama_like_gguf_config(f, arch, ir::ops::RopeLayout::kInterleaved, c);
}

Status qwen_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  return llama_like_gguf_config(f, arch, ir::ops::RopeLayout::kHalf, c);
}

// llama.cpp's qwen3moe: qwen3 with every layer routed, softmax top-k renormalized.
Status qwen3moe_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c) {
  Status s = qwen_gguf_config(f, arch, c);
  if (!s) return s;
  const std::pair<const char*, int64_t*> experts[] = {{"expert_count", &c.n_experts},
                                                      {"expert_used_count", &c.n_experts_used},
                                                      {"expert_feed_forward_length", &c.expert_hidden_dim}};
  for (const auto& [k, out] : experts) {
    Result<int64_t> v = f.get_int(str_cat(arch, ".", k));
    if (!v) return v.take_error();
    *out = *v;
  }
  c.expert_layers.assign(static_cast<size_t>(std::max<int64_t>(c.n_layers, 0)), true);
  c.expert_weights_norm = true;
  return {};
}

}  // namespace kvf::models
