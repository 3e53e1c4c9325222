// libFuzzer target: the input as Hugging Face config.json text through parse_hf_config, then
// every typed getter on the keys the model families read, the per-layer-type rope lookups and
// scaled_inv_freq on each resolved rope. Any failure must be a typed kvf::Error.
#include <algorithm>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "load/hf_config.h"

using namespace kvf;

namespace {

constexpr const char* kKeys[] = {
    "model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "layer_norm_epsilon",
    "tie_word_embeddings", "layer_types", "sliding_window", "use_sliding_window", "rope_theta", "bos_token_id",
    "eos_token_id", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar", "n_inner",
    "q_lora_rank", "first_k_dense_replace", "no_such_key"};

void touch_getters(const load::HfConfig& c, const std::string& k) {
  (void)c.has(k);
  (void)fuzz::ok_or_typed(c.get_int(k));
  (void)fuzz::ok_or_typed(c.get_float(k));
  (void)fuzz::ok_or_typed(c.get_string(k));
  (void)fuzz::ok_or_typed(c.get_bool(k));
  (void)fuzz::ok_or_typed(c.get_ints(k));
  (void)fuzz::ok_or_typed(c.get_floats(k));
  (void)fuzz::ok_or_typed(c.get_strings(k));
  (void)fuzz::ok_or_typed(c.get_int_or(k, 1));
  (void)fuzz::ok_or_typed(c.get_float_or(k, 1.0));
  (void)fuzz::ok_or_typed(c.get_string_or(k, "x"));
  (void)fuzz::ok_or_typed(c.get_bool_or(k, false));
}

// The rotary dimension a family would use (head_dim, capped for speed), through the scaling.
void touch_rope(const load::HfConfig& c, const load::HfRope& r) {
  const int64_t head = std::min<int64_t>(c.head_dim().value_or(64), 4096);
  const auto rotary = static_cast<int64_t>(static_cast<double>(head) * r.partial_rotary_factor) / 2 * 2;
  (void)fuzz::ok_or_typed(load::scaled_inv_freq(rotary, r));
  (void)fuzz::ok_or_typed(load::scaled_inv_freq(std::max<int64_t>(rotary, 2), r));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<load::HfConfig> c = load::parse_hf_config(text, "fuzz.json");
  if (!fuzz::ok_or_typed(c)) return 0;
  for (const char* k : kKeys) touch_getters(*c, k);
  touch_rope(*c, c->rope());
  for (const auto& [type, rope] : c->rope_by_layer_type()) touch_rope(*c, rope);
  std::vector<std::string> types = c->layer_types();
  types.insert(types.end(), {"full_attention", "sliding_attention", "no_such_type"});
  for (const std::string& t : types) {
    Result<load::HfRope> r = c->rope_for_layer_type(t);
    if (fuzz::ok_or_typed(r)) touch_rope(*c, *r);
  }
  return 0;
}
