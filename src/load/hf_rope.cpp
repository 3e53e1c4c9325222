// Rotary-embedding frequencies for an HfRope: the base inv_freq as transformers computes it
// (f32 throughout), "linear" scaling, and the Llama 3.1 rule with its smooth middle band.
// Pure math on floats; no graph types.
#include <cmath>
#include <numbers>

#include "load/hf_config.h"

namespace kvf::load {

std::vector<float> rope_inv_freq(int64_t rotary_dim, double theta) {
  std::vector<float> out;
  if (rotary_dim <= 0) return out;
  const auto base = static_cast<float>(theta);
  for (int64_t i = 0; 2 * i < rotary_dim; ++i) {  // arange(0, dim, 2): ceil(dim / 2) entries
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    out.push_back(1.0f / std::pow(base, exponent));
  }
  return out;
}

std::vector<float> linear_inv_freq(std::span<const float> inv_freq, const HfRope& rope) {
  std::vector<float> out;
  out.reserve(inv_freq.size());
  for (float f : inv_freq) out.push_back(static_cast<float>(f / rope.factor));
  return out;
}

std::vector<float> llama3_inv_freq(std::span<const float> inv_freq, const HfRope& rope) {
  const auto old_len = static_cast<double>(rope.original_max_position_embeddings);
  const double low = rope.low_freq_factor, high = rope.high_freq_factor;
  const double low_freq_wavelen = old_len / low;    // longer than this: scale fully
  const double high_freq_wavelen = old_len / high;  // shorter than this: keep
  std::vector<float> out;
  out.reserve(inv_freq.size());
  for (float f32 : inv_freq) {
    const double f = f32;
    const double wavelen = 2 * std::numbers::pi / f;
    double v = f;
    if (wavelen > low_freq_wavelen) {
      v = f / rope.factor;
    } else if (wavelen >= high_freq_wavelen && high != low) {
      const double smooth = (old_len / wavelen - low) / (high - low);
      v = (1 - smooth) * f / rope.factor + smooth * f;
    }
    out.push_back(static_cast<float>(v));
  }
  return out;
}

Result<std::vector<float>> scaled_inv_freq(int64_t rotary_dim, const HfRope& rope) {
  if (rotary_dim <= 0 || rotary_dim % 2 != 0) {
    return invalid_input("rope: rotary dimension ", rotary_dim, " must be positive and even");
  }
  const std::vector<float> base = rope_inv_freq(rotary_dim, rope.theta);
  if (rope.type == "default") return base;
  if (rope.type == "linear") return linear_inv_freq(base, rope);
  if (rope.type == "llama3") return llama3_inv_freq(base, rope);
  return unsupported("rope_type ", rope.type, " is not supported (kvforge computes default, linear and llama3)");
}

}  // namespace kvf::load
