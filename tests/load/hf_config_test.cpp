// config.json reader: typed getters, both rope spellings resolving to the same HfRope, rope
// keyed by layer type, every fixture config, and the Llama 3.1 / linear frequency scaling
// checked against an independent double-precision formula.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numbers>

#include "load/hf_config.h"
#include "testing.h"

namespace kvf {
namespace {

using load::HfConfig;
using load::HfRope;

HfConfig parse(const std::string& text) { return testing::must(load::parse_hf_config(text, "config.json")); }

void expect_bad(Result<HfConfig> r, const std::string& part) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << part;
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_EQ(r.error().message().rfind("config.json: ", 0), 0u) << r.error().message();
  EXPECT_NE(r.error().message().find(part), std::string::npos) << r.error().message();
}

template <class T>
void expect_bad_get(Result<T> r, const std::string& part) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << part;
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput) << r.error().to_string();
  EXPECT_NE(r.error().message().find("config.json: " + part), std::string::npos) << r.error().message();
}

TEST(HfConfig, BothRopeFormsAgree) {
  const std::string keys = R"("factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192)";
  const HfConfig fresh = parse(R"({"rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", )" + keys + "}}");
  const HfConfig legacy = parse(R"({"rope_theta": 500000, "rope_scaling": {"rope_type": "llama3", )" + keys + "}}");
  const HfConfig oldest = parse(R"({"rope_theta": 500000.0, "rope_scaling": {"type": "llama3", )" + keys + "}}");
  EXPECT_EQ(fresh.rope(), legacy.rope());
  EXPECT_EQ(fresh.rope(), oldest.rope());
  EXPECT_TRUE(fresh.has_rope());
  const HfRope& r = fresh.rope();
  EXPECT_EQ(r.type, "llama3");
  EXPECT_EQ(r.theta, 500000.0);
  EXPECT_EQ(r.factor, 8.0);
  EXPECT_EQ(r.low_freq_factor, 1.0);
  EXPECT_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 8192);
  EXPECT_EQ(r.partial_rotary_factor, 1.0);

  const HfConfig lin_new = parse(R"({"rope_parameters": {"rope_theta": 1e4, "rope_type": "linear", "factor": 2,
                                     "partial_rotary_factor": 0.5}})");
  const HfConfig lin_old = parse(R"({"rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                     "rope_scaling": {"type": "linear", "factor": 2.0}})");
  EXPECT_EQ(lin_new.rope(), lin_old.rope());
  EXPECT_EQ(lin_new.rope().partial_rotary_factor, 0.5);
  // Plain theta, old and new; no rope keys at all gives the default and has_rope() false.
  EXPECT_EQ(parse(R"({"rope_theta": 1000000.0})").rope(),
            parse(R"({"rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})").rope());
  EXPECT_EQ(parse(R"({"rope_theta": 1e6, "rope_scaling": null})").rope().theta, 1e6);
  const HfConfig none = parse(R"({"model_type": "gpt2"})");
  EXPECT_FALSE(none.has_rope());
  EXPECT_EQ(none.rope(), HfRope{});
}

TEST(HfConfig, RopeKeyedByLayerType) {
  const HfConfig c = parse(R"({"rope_theta": 10000.0, "layer_types": ["sliding_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default"}}})");
  ASSERT_EQ(c.rope_by_layer_type().size(), 2u);
  EXPECT_EQ(c.rope().type, "linear");
  EXPECT_EQ(c.rope().theta, 1e6);
  HfRope sliding = testing::must(c.rope_for_layer_type("sliding_attention"));
  EXPECT_EQ(sliding.type, "default");
  EXPECT_EQ(sliding.theta, 10000.0);  // falls back to the top-level rope_theta
  EXPECT_EQ(testing::must(c.rope_for_layer_type("full_attention")).factor, 8.0);
  EXPECT_EQ(c.layer_types(), (std::vector<std::string>{"sliding_attention", "full_attention"}));
  Result<HfRope> missing = c.rope_for_layer_type("chunked_attention");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("chunked_attention"), std::string::npos);
  // A flat config answers every layer type with its one rope.
  EXPECT_EQ(testing::must(parse(R"({"rope_theta": 5.0})").rope_for_layer_type("anything")).theta, 5.0);
  expect_bad(load::parse_hf_config(R"({"rope_parameters": {"full_attention": {"rope_type": "llama3", "factor": 8}}})",
                                   "config.json"),
             "rope_parameters.full_attention.low_freq_factor: missing; rope_type llama3 needs it");
}

// The Llama 3.1 rule as Meta's reference states it, in double.
std::vector<double> reference_llama3(const std::vector<double>& freqs, double factor, double low, double high,
                                     double old_len) {
  std::vector<double> out;
  for (double f : freqs) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < old_len / high) {
      out.push_back(f);
    } else if (wavelen > old_len / low) {
      out.push_back(f / factor);
    } else {
      const double smooth = (old_len / wavelen - low) / (high - low);
      out.push_back((1 - smooth) * f / factor + smooth * f);
    }
  }
  return out;
}

std::vector<double> reference_inv_freq(int dim, double theta) {
  std::vector<double> out;
  for (int i = 0; i < dim; i += 2) out.push_back(1.0 / std::pow(theta, static_cast<double>(i) / dim));
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * std::abs(want[i])) << "index " << i;
}

HfRope llama3(double theta, double factor, double low, double high, int64_t original) {
  HfRope r;
  r.type = "llama3";
  r.theta = theta;
  r.factor = factor;
  r.low_freq_factor = low;
  r.high_freq_factor = high;
  r.original_max_position_embeddings = original;
  return r;
}

TEST(HfConfig, Llama3InvFreqMatchesTheReference) {
  // head_dim 8, theta 500000, factor 8, low 1, high 4, original 16: wavelengths 2*pi, 167, 4443,
  // 118145 against bands at 4 and 16, so index 0 is smoothed and the rest divided by 8.
  const HfRope r = llama3(500000, 8, 1, 4, 16);
  const std::vector<float> base = load::rope_inv_freq(8, r.theta);
  expect_close(base, reference_inv_freq(8, 500000));
  const std::vector<float> got = load::llama3_inv_freq(base, r);
  const double smooth0 = (16 / (2 * std::numbers::pi) - 1) / 3;  // 0.5154...
  EXPECT_NEAR(got[0], (1 - smooth0) / 8 + smooth0, 1e-7);
  EXPECT_NEAR(got[1], std::pow(500000.0, -0.25) / 8, 5e-9);
  EXPECT_NEAR(got[3], std::pow(500000.0, -0.75) / 8, 1e-11);
  expect_close(got, reference_llama3(reference_inv_freq(8, 500000), 8, 1, 4, 16));
  expect_close(testing::must(load::scaled_inv_freq(8, r)), reference_llama3(reference_inv_freq(8, 500000), 8, 1, 4, 16));
  // theta 10000, original 64: wavelengths 6.3 (kept: < 16), 62.8 (smoothed: in [16, 64]),
  // 628 and 6283 (divided: > 64).
  const HfRope r2 = llama3(10000, 4, 1, 4, 64);
  const std::vector<float> got2 = load::llama3_inv_freq(load::rope_inv_freq(8, 10000), r2);
  EXPECT_FLOAT_EQ(got2[0], 1.0f);
  const double smooth1 = (64 / (2 * std::numbers::pi / 0.1) - 1) / 3;  // 0.0062...
  EXPECT_NEAR(got2[1], (1 - smooth1) * 0.1 / 4 + smooth1 * 0.1, 1e-8);
  EXPECT_NEAR(got2[2], 0.01 / 4, 1e-9);
  EXPECT_NEAR(got2[3], 0.001 / 4, 1e-10);
  expect_close(got2, reference_llama3(reference_inv_freq(8, 10000), 4, 1, 4, 64));
  // The llama3_scaled fixture: head_dim 32, its rope_parameters.
  const HfConfig c = testing::must(load::read_hf_config(testing::fixture_dir("llama3_scaled") + "/config.json"));
  expect_close(testing::must(load::scaled_inv_freq(*c.head_dim(), c.rope())),
               reference_llama3(reference_inv_freq(32, 500000), 8, 1, 4, 16));
}

TEST(HfConfig, LinearAndDefaultScaling) {
  HfRope r;
  r.theta = 10000;
  expect_close(testing::must(load::scaled_inv_freq(16, r)), reference_inv_freq(16, 10000));
  r.type = "linear";
  r.factor = 4;
  std::vector<double> want = reference_inv_freq(16, 10000);
  for (double& w : want) w /= 4;
  expect_close(testing::must(load::scaled_inv_freq(16, r)), want);
  r.type = "yarn";
  Result<std::vector<float>> yarn = load::scaled_inv_freq(16, r);
  ASSERT_FALSE(yarn.ok());
  EXPECT_EQ(yarn.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(yarn.error().message().find("yarn"), std::string::npos);
  r.type = "default";
  Result<std::vector<float>> odd = load::scaled_inv_freq(7, r);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code(), ErrorCode::kInvalidInput);
}

TEST(HfConfig, EveryFixtureConfigParses) {
  const char* src = std::getenv("KVF_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "KVF_SOURCE_DIR is not set";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(src) + "/tests/fixtures")) {
    const std::string path = entry.path().string() + "/config.json";
    if (!std::filesystem::exists(path)) continue;
    ++seen;
    Result<HfConfig> c = load::read_hf_config(path);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_FALSE(c->model_type().empty()) << path;
    EXPECT_GT(testing::must(c->get_int("vocab_size")), 0);
    const std::string dir = entry.path().filename().string();
    EXPECT_EQ(c->has_rope(), dir != "gpt2" && dir != "bloom") << path;
  }
  EXPECT_GE(seen, 9);
  const HfConfig scaled = testing::must(load::read_hf_config(testing::fixture_dir("llama3_scaled") + "/config.json"));
  EXPECT_EQ(scaled.rope(), llama3(500000, 8, 1, 4, 16));
  EXPECT_TRUE(scaled.tie_word_embeddings());
  const HfConfig llama = testing::must(load::read_hf_config(testing::fixture_dir("llama") + "/config.json"));
  EXPECT_EQ(llama.model_type(), "llama");
  EXPECT_FALSE(llama.tie_word_embeddings());
  EXPECT_EQ(llama.head_dim(), 16);
  EXPECT_EQ(llama.rope().type, "default");
  EXPECT_EQ(testing::must(llama.get_float("rms_norm_eps")), 1e-5);
  const HfConfig gemma = testing::must(load::read_hf_config(testing::fixture_dir("gemma2") + "/config.json"));
  EXPECT_EQ(gemma.layer_types().size(), 4u);
  EXPECT_EQ(gemma.layer_types()[1], "full_attention");
  EXPECT_EQ(testing::must(gemma.get_float("final_logit_softcapping")), 30.0);
  const HfConfig qwen2 = testing::must(load::read_hf_config(testing::fixture_dir("qwen2") + "/config.json"));
  EXPECT_FALSE(qwen2.head_dim().has_value());
  EXPECT_EQ(qwen2.rope().theta, 1e6);
  EXPECT_FALSE(qwen2.has("sliding_window"));  // null counts as absent
  EXPECT_EQ(testing::must(qwen2.get_int_or("sliding_window", -1)), -1);
  const HfConfig ds = testing::must(load::read_hf_config(testing::fixture_dir("deepseek_v2") + "/config.json"));
  EXPECT_EQ(testing::must(ds.get_int_or("q_lora_rank", 0)), 0);
  EXPECT_EQ(testing::must(ds.get_int("qk_rope_head_dim")), 8);
  EXPECT_EQ(testing::must(ds.get_strings("architectures")), (std::vector<std::string>{"DeepseekV2ForCausalLM"}));
}

TEST(HfConfig, TypedGettersNameTheKey) {
  const HfConfig c = parse(R"({"model_type": "llama", "n": 4, "x": 0.5, "flag": true, "names": ["a", 3],
      "ints": [1, 2, 3], "nums": [1, 2.5], "big": 18446744073709551615, "neg": -3})");
  EXPECT_EQ(testing::must(c.get_int("n")), 4);
  EXPECT_EQ(testing::must(c.get_int("neg")), -3);
  EXPECT_EQ(testing::must(c.get_float("n")), 4.0);  // integers widen
  EXPECT_EQ(testing::must(c.get_float("x")), 0.5);
  EXPECT_TRUE(testing::must(c.get_bool("flag")));
  EXPECT_EQ(testing::must(c.get_string("model_type")), "llama");
  EXPECT_EQ(testing::must(c.get_ints("ints")), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(testing::must(c.get_floats("nums")), (std::vector<double>{1, 2.5}));
  EXPECT_EQ(testing::must(c.get_float_or("missing", 2.0)), 2.0);
  EXPECT_EQ(testing::must(c.get_string_or("missing", "z")), "z");
  EXPECT_FALSE(testing::must(c.get_bool_or("missing", false)));
  EXPECT_TRUE(c.has("n"));
  EXPECT_FALSE(c.has("missing"));
  EXPECT_TRUE(c.tie_word_embeddings());  // PretrainedConfig's default
  expect_bad_get(c.get_int("x"), "x: is number; expected an integer");
  expect_bad_get(c.get_int("model_type"), "model_type: is string; expected an integer");
  expect_bad_get(c.get_int("missing"), "missing: missing; expected an integer");
  expect_bad_get(c.get_int("big"), "big: 18446744073709551615 is too large");
  expect_bad_get(c.get_float("flag"), "flag: is boolean; expected a number");
  expect_bad_get(c.get_bool("n"), "n: is number; expected a boolean");
  expect_bad_get(c.get_string("n"), "n: is number; expected a string");
  expect_bad_get(c.get_strings("names"), "names[1]: is number; expected a string");
  expect_bad_get(c.get_ints("nums"), "nums[1]: is number; expected an integer");
  expect_bad_get(c.get_floats("n"), "n: is number; expected an array of numbers");
  expect_bad_get(c.get_int_or("model_type", 0), "model_type: is string");  // present, wrong type
  expect_bad_get(c.get_bool_or("n", true), "n: is number");
}

TEST(HfConfig, MalformedConfigsAreTypedErrors) {
  auto p = [](const std::string& text) { return load::parse_hf_config(text, "config.json"); };
  expect_bad(p(R"({"model_type": "llama",)"), "malformed JSON");
  expect_bad(p(""), "malformed JSON");
  expect_bad(p("[1, 2]"), "expected a JSON object");
  expect_bad(p(R"({"model_type": 3})"), "model_type: is number");
  expect_bad(p(R"({"head_dim": "16"})"), "head_dim: is string; expected an integer");
  expect_bad(p(R"({"head_dim": 0})"), "head_dim: 0 must be positive");
  expect_bad(p(R"({"layer_types": ["full_attention", 1]})"), "layer_types[1]: is number");
  expect_bad(p(R"({"layer_types": "full_attention"})"), "layer_types: is string");
  expect_bad(p(R"({"tie_word_embeddings": "yes"})"), "tie_word_embeddings: is string; expected a boolean");
  expect_bad(p(R"({"rope_theta": "1e4"})"), "rope_theta: is string; expected a number");
  expect_bad(p(R"({"rope_theta": -1})"), "rope_theta: -1 must be positive");
  expect_bad(p(R"({"rope_parameters": {"rope_theta": "big"}})"), "rope_parameters.rope_theta: is string");
  expect_bad(p(R"({"rope_parameters": {"rope_type": 3}})"), "rope_parameters.rope_type: is number");
  expect_bad(p(R"({"rope_parameters": 5})"), "rope_parameters: is number; expected an object");
  expect_bad(p(R"({"rope_scaling": {"type": "linear"}})"), "rope_scaling.factor: missing; rope_type linear needs it");
  expect_bad(p(R"({"rope_scaling": {"type": "linear", "factor": "2"}})"), "rope_scaling.factor: is string");
  expect_bad(p(R"({"rope_scaling": {"type": "linear", "factor": 0}})"), "rope_scaling.factor: 0 must be positive");
  expect_bad(p(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                   "high_freq_factor": 4}})"),
             "rope_parameters.original_max_position_embeddings: missing");
  expect_bad(p(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                   "high_freq_factor": 4, "original_max_position_embeddings": 8192.5}})"),
             "rope_parameters.original_max_position_embeddings: is number; expected an integer");
  expect_bad(p(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 2,
                   "high_freq_factor": 2, "original_max_position_embeddings": 8192}})"),
             "rope_parameters.high_freq_factor: equals low_freq_factor");
  expect_bad(p(R"({"partial_rotary_factor": 1.5})"), "partial_rotary_factor: 1.5 must be in (0, 1]");
  Result<HfConfig> missing = load::read_hf_config("/nonexistent/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(missing.error().message().find("/nonexistent/config.json"), std::string::npos);
}

}  // namespace
}  // namespace kvf
