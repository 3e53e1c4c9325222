// Hugging Face config.json reader: typed getters that name the file and key on error, plus
// the resolved rotary-embedding settings from either the older rope_theta/rope_scaling form or
// transformers 5's rope_parameters (optionally keyed by layer type), and the rope scaling math.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace kvf::load {

// Rotary embedding settings as transformers resolves them. Fields a rope type does not use
// keep their defaults.
struct HfRope {
  double theta = 10000.0;
  std::string type = "default";  // "default", "linear", "dynamic", "llama3", "yarn", "longrope", ...
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position_embeddings = 0;  // 0 when the config does not give it
  double partial_rotary_factor = 1.0;
  double beta_fast = 32.0;  // yarn
  double beta_slow = 1.0;   // yarn
  std::optional<double> attention_factor;  // yarn, longrope
  bool operator==(const HfRope&) const = default;
};

class HfConfig {
 public:
  // The file (or name) errors mention.
  const std::string& name() const { return name_; }
  // "llama", "qwen2", ...; empty when the config has no model_type.
  const std::string& model_type() const { return model_type_; }

  // True when the top-level key is present and not null.
  bool has(const std::string& key) const;
  // A missing (or null) key or a wrong type is a kInvalidInput naming the file and key.
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;  // integers widen
  Result<std::string> get_string(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  Result<std::vector<int64_t>> get_ints(const std::string& key) const;
  Result<std::vector<double>> get_floats(const std::string& key) const;
  Result<std::vector<std::string>> get_strings(const std::string& key) const;
  // Absent or null gives the fallback; present with the wrong type is still an error.
  Result<int64_t> get_int_or(const std::string& key, int64_t fallback) const;
  Result<double> get_float_or(const std::string& key, double fallback) const;
  Result<std::string> get_string_or(const std::string& key, const std::string& fallback) const;
  Result<bool> get_bool_or(const std::string& key, bool fallback) const;

  // Resolved when the file is parsed.
  // The model-wide rope; when rope_parameters is keyed by layer type, its "full_attention"
  // entry (else the first entry by name).
  const HfRope& rope() const { return rope_; }
  // True when the config says anything about rope (rope_theta, rope_scaling or rope_parameters).
  bool has_rope() const { return has_rope_; }
  // Non-empty only when rope_parameters is keyed by layer type ({"full_attention": {...}, ...}).
  const std::map<std::string, HfRope>& rope_by_layer_type() const { return rope_by_layer_type_; }
  // The rope for one layer type: the keyed entry when present, else rope(). A keyed config
  // without that layer type is a kInvalidInput.
  Result<HfRope> rope_for_layer_type(const std::string& layer_type) const;
  const std::vector<std::string>& layer_types() const { return layer_types_; }  // empty when absent
  std::optional<int64_t> head_dim() const { return head_dim_; }                 // absent or null: none
  bool tie_word_embeddings() const { return tie_word_embeddings_; }             // PretrainedConfig default: true

 private:
  friend Result<HfConfig> parse_hf_config(const std::string& text, const std::string& name);
  struct Doc;
  std::shared_ptr<const Doc> doc_;
  std::string name_;
  std::string model_type_;
  HfRope rope_;
  bool has_rope_ = false;
  std::map<std::string, HfRope> rope_by_layer_type_;
  std::vector<std::string> layer_types_;
  std::optional<int64_t> head_dim_;
  bool tie_word_embeddings_ = true;
};

Result<HfConfig> read_hf_config(const std::string& path);
// Parses config.json text; `name` is what errors mention.
Result<HfConfig> parse_hf_config(const std::string& text, const std::string& name);

// ---- rope frequencies (hf_rope.cpp) -------------------------------------------------------

// inv_freq[i] = 1 / theta^(2i / rotary_dim) for 2i < rotary_dim, in f32 as transformers computes it.
std::vector<float> rope_inv_freq(int64_t rotary_dim, double theta);
// "linear": every frequency divided by rope.factor.
std::vector<float> linear_inv_freq(std::span<const float> inv_freq, const HfRope& rope);
// Llama 3.1: wavelengths longer than original/low_freq_factor are divided by factor, shorter
// than original/high_freq_factor kept, and those between interpolated smoothly.
std::vector<float> llama3_inv_freq(std::span<const float> inv_freq, const HfRope& rope);
// rope_inv_freq scaled by rope.type: "default", "linear" and "llama3"; others are kUnsupported.
Result<std::vector<float>> scaled_inv_freq(int64_t rotary_dim, const HfRope& rope);

}  // namespace kvf::load
