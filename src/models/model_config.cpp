// ModelConfig checks.
#include "models/model_config.h"

#include <cmath>

namespace kvf::models {

bool ModelConfig::sliding(int64_t layer) const {
  if (sliding_window <= 0) return false;
  if (layer_sliding.empty()) return true;
  return layer < static_cast<int64_t>(layer_sliding.size()) && layer_sliding[static_cast<size_t>(layer)];
}

namespace {
// Bounds far above any published model, low enough that every product below fits.
constexpr int64_t kMaxSize = int64_t{1} << 24;
}  // namespace

Status ModelConfig::check_experts() const {
  if (n_experts == 0) return {};
  constexpr int64_t kMaxExperts = 4096;
  if (n_experts < 0 || n_experts > kMaxExperts) {
    return invalid_input(arch, " config: n_experts = ", n_experts, " must be in 1..", kMaxExperts);
  }
  if (n_experts_used < 1 || n_experts_used > n_experts) {
    return invalid_input(arch, " config: experts per token = ", n_experts_used, " must be in 1..", n_experts);
  }
  if (expert_hidden_dim <= 0 || expert_hidden_dim > kMaxSize) {
    return invalid_input(arch, " config: expert hidden dim = ", expert_hidden_dim, " must be in 1..", kMaxSize);
  }
  if (n_shared_experts < 0 || n_shared_experts > kMaxExperts) {
    return invalid_input(arch, " config: shared experts = ", n_shared_experts, " must be in 0..", kMaxExperts);
  }
  if (static_cast<int64_t>(expert_layers.size()) != n_layers) {
    return invalid_input(arch, " config: ", expert_layers.size(), " expert-layer flags for ", n_layers, " layers");
  }
  if (shared_expert_hidden_dim < 0 || shared_expert_hidden_dim > kMaxSize) {
    return invalid_input(arch, " config: shared expert hidden dim = ", shared_expert_hidden_dim, " must be in 0..", kMaxSize);
  }
  if (expert_groups < 1 || n_experts % expert_groups != 0 || (expert_groups > 1 && n_experts / expert_groups < 2)) {
    return invalid_input(arch, " config: ", expert_groups, " expert groups for ", n_experts,
                         " experts (they must split them evenly, at least 2 to a group)");
  }
  if (expert_groups_used < 1 || expert_groups_used > expert_groups) {
    return invalid_input(arch, " config: expert groups used = ", expert_groups_used, " must be in 1..", expert_groups);
  }
  if (!std::isfinite(expert_weights_scale) || expert_weights_scale <= 0) {
    return invalid_input(arch, " config: routed scaling factor ", expert_weights_scale, " must be finite and positive");
  }
  return {};
}

namespace {

// The indexer reads MLA's query latent and ropes its keys with MLA's rotary dims.
Status check_indexer(const ModelConfig& c) {
  if (c.index_topk == 0 && c.index_heads == 0 && c.index_head_dim == 0) return {};
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"top-k", c.index_topk}, {"heads", c.index_heads},
                                {"head dim", c.index_head_dim}}) {
    if (v <= 0 || v > kMaxSize) {
      return invalid_input(c.arch, " config: the sparse-attention indexer's ", name, " = ", v, " must be in 1..", kMaxSize);
    }
  }
  if (!latent_kv(c) || c.q_lora_rank <= 0) {
    return invalid_input(c.arch, " config: the sparse-attention indexer needs latent attention with a q_lora_rank");
  }
  if (c.index_head_dim < c.qk_rope_dim) {
    return invalid_input(c.arch, " config: the indexer's head dim ", c.index_head_dim, " is below the rope dims ",
                         c.qk_rope_dim);
  }
  return {};
}

}  // namespace

Status ModelConfig::check() const {
  constexpr int64_t kMaxLayers = 4096, kMaxMatrix = int64_t{1} << 36;
  const std::pair<const char*, int64_t> sizes[] = {{"vocab", vocab},           {"dim", dim},
                                                   {"n_layers", n_layers},     {"n_heads", n_heads},
                                                   {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim},
                                                   {"hidden_dim", hidden_dim}, {"context", context}};
  for (const auto& [name, v] : sizes) {
    if (v <= 0) return invalid_input(arch, " config: ", name, " = ", v, " must be positive");
    if (v > kMaxSize) return invalid_input(arch, " config: ", name, " = ", v, " is beyond ", kMaxSize);
  }
  if (n_layers > kMaxLayers) return invalid_input(arch, " config: n_layers = ", n_layers, " is beyond ", kMaxLayers);
  const std::pair<const char*, int64_t> matrices[] = {
      {"vocab x dim", vocab * dim}, {"hidden_dim x dim", hidden_dim * dim}, {"n_heads x head_dim x dim", n_heads * head_dim * dim}};
  for (const auto& [name, n] : matrices) {
    if (n > kMaxMatrix) return invalid_input(arch, " config: ", name, " = ", n, " elements is beyond ", kMaxMatrix);
  }
  const std::pair<const char*, double> reals[] = {{"norm eps", norm_eps},         {"rope theta", rope_theta},
                                                  {"embed scale", embed_scale},   {"attn scale", attn_scale},
                                                  {"attn softcap", attn_softcap}, {"final softcap", final_softcap}};
  for (const auto& [name, v] : reals) {
    if (!std::isfinite(v) || v < 0) return invalid_input(arch, " config: ", name, " = ", v, " must be finite and not negative");
  }
  for (float f : rope_inv_freq) {
    if (!std::isfinite(f)) return invalid_input(arch, " config: a rope frequency is not finite");
  }
  if (n_heads % n_kv_heads != 0) {
    return invalid_input(arch, " config: n_heads ", n_heads, " is not a multiple of n_kv_heads ", n_kv_heads);
  }
  const int64_t rot = rotary_dim > 0 ? rotary_dim : head_dim;
  if (rot % 2 != 0 || rot > head_dim) {
    return invalid_input(arch, " config: rotary dim ", rot, " must be even and at most head_dim ", head_dim);
  }
  if (!rope_inv_freq.empty() && static_cast<int64_t>(rope_inv_freq.size()) != rot / 2) {
    return invalid_input(arch, " config: ", rope_inv_freq.size(), " rope frequencies for rotary dim ", rot);
  }
  if (!layer_sliding.empty() && static_cast<int64_t>(layer_sliding.size()) != n_layers) {
    return invalid_input(arch, " config: layer_types has ", layer_sliding.size(), " entries for ", n_layers, " layers");
  }
  if (norm_eps <= 0 || rope_theta <= 0) return invalid_input(arch, " config: norm eps and rope theta must be positive");
  if (latent_kv(*this)) {
    for (const auto& [name, v] : {std::pair<const char*, int64_t>{"qk_nope_dim", qk_nope_dim}, {"qk_rope_dim", qk_rope_dim},
                                  {"v_head_dim", v_head_dim}, {"kv_lora_rank", kv_lora_rank}}) {
      if (v <= 0 || v > kMaxSize) return invalid_input(arch, " config: ", name, " = ", v, " must be positive and at most ", kMaxSize);
    }
    if (qk_rope_dim % 2 != 0 || head_dim != qk_nope_dim + qk_rope_dim || q_lora_rank < 0 || q_lora_rank > kMaxSize) {
      return invalid_input(arch, " config: latent heads: rope ", qk_rope_dim, " must be even, head_dim ", head_dim,
                           " must be nope ", qk_nope_dim, " + rope, and q_lora_rank ", q_lora_rank, " in range");
    }
  }
  Status s = check_indexer(*this);
  if (!s) return s;
  return check_experts();
}

ir::ops::RopeSpec ModelConfig::rope_spec() const {
  return {.head_dim = head_dim, .rotary_dim = rotary_dim, .theta = rope_theta, .layout = rope_layout,
          .inv_freq = rope_inv_freq};
}

ir::ops::RopeSpec ModelConfig::rope_spec_local() const {
  return {.head_dim = head_dim, .rotary_dim = rotary_dim, .theta = rope_theta_local, .layout = rope_layout, .inv_freq = {}};
}

int64_t kv_elems_per_token_layer(const ModelConfig& cfg) {
  if (latent_kv(cfg)) return cfg.kv_lora_rank + cfg.qk_rope_dim + (sparse_indexer(cfg) ? cfg.index_head_dim : 0);
  return 2 * cfg.n_kv_heads * cfg.head_dim;
}

int64_t kv_bill_bytes(const ModelConfig& cfg, int64_t tokens, int64_t bytes_per_elem) {
  return cfg.n_layers * kv_elems_per_token_layer(cfg) * tokens * bytes_per_elem;
}

}  // namespace kvf::models
