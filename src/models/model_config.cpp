// ModelConfig checks.
#include "models/model_config.h"

namespace kvf::models {

bool ModelConfig::sliding(int64_t layer) const {
  if (sliding_window <= 0) return false;
  if (layer_sliding.empty()) return true;
  return layer < static_cast<int64_t>(layer_sliding.size()) && layer_sliding[static_cast<size_t>(layer)];
}

Status ModelConfig::check() const {
  const std::pair<const char*, int64_t> sizes[] = {{"vocab", vocab},           {"dim", dim},
                                                   {"n_layers", n_layers},     {"n_heads", n_heads},
                                                   {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim},
                                                   {"hidden_dim", hidden_dim}, {"context", context}};
  for (const auto& [name, v] : sizes) {
    if (v <= 0) return invalid_input(arch, " config: ", name, " = ", v, " must be positive");
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
  return {};
}

ir::ops::RopeSpec ModelConfig::rope_spec() const {
  return {.head_dim = head_dim, .rotary_dim = rotary_dim, .theta = rope_theta, .layout = rope_layout,
          .inv_freq = rope_inv_freq};
}

int64_t kv_elems_per_token_layer(const ModelConfig& cfg) {
  if (latent_kv(cfg)) return cfg.kv_lora_rank + cfg.qk_rope_dim;
  return 2 * cfg.n_kv_heads * cfg.head_dim;
}

int64_t kv_bill_bytes(const ModelConfig& cfg, int64_t tokens, int64_t bytes_per_elem) {
  return cfg.n_layers * kv_elems_per_token_layer(cfg) * tokens * bytes_per_elem;
}

}  // namespace kvf::models
