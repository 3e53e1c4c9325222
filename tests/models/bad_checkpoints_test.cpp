// Opening broken checkpoints never crashes and never runs: NaN-filled weights in GGUF,
// llama2.c and safetensors files, and broken config.json / tokenizer.json, give typed errors
// naming the file and the tensor or field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "load/safetensors.h"
#include "models/export_gguf.h"
#include "models/model.h"
#include "models/synthetic.h"
#include "testing.h"

namespace kvf {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / str_cat("kvf_bad_", ::getpid(), "_", name);
  fs::remove_all(p);
  return p;
}

void expect_refused(const std::string& path, const std::string& needle) {
  Result<models::Model> m = models::open_model(path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = true});
  ASSERT_FALSE(m.ok()) << path << " opened although it should fail with: " << needle;
  EXPECT_EQ(m.error().code(), ErrorCode::kInvalidInput) << m.error().to_string();
  EXPECT_NE(m.error().message().find(needle), std::string::npos) << m.error().message();
}

TEST(BadCheckpoints, NanInGgufWeights) {
  models::Model m = testing::must(models::open_synthetic("llama-260k"));
  HostTensor w = m.weights.tensors().at("blk.2.ffn_up.weight");
  w.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();  // synthetic weights are owned
  const fs::path p = scratch("nan.gguf");
  ASSERT_TRUE(models::export_gguf(m, p.string()).ok());
  expect_refused(p.string(), "blk.2.ffn_up.weight holds a non-finite value");
  fs::remove(p);
}

TEST(BadCheckpoints, NanInLlama2cWeights) {
  std::optional<std::string> src = testing::model_file("stories260K/stories260K.bin");
  if (!src) KVF_SKIP_MISSING("stories260K.bin not present");
  std::string bytes = testing::read_file(*src);
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(bytes.data() + 28 + 4 * 100, &inf, 4);  // inside token_embd
  const fs::path p = scratch("inf.bin");
  testing::write_file(p.string(), bytes);
  expect_refused(p.string(), "token_embd.weight holds a non-finite value (inf) at element 100");
  fs::remove(p);
}

// A copy of the llama fixture directory to break.
fs::path fixture_copy(const std::string& name) {
  const fs::path dst = scratch(name);
  fs::copy(testing::fixture_dir("llama"), dst);
  return dst;
}

TEST(BadCheckpoints, NanInSafetensorsWeights) {
  const fs::path dir = fixture_copy("nan_st");
  const load::SafetensorsSet st = testing::must(load::open_safetensors(dir.string()));
  const load::SafetensorsTensorInfo* info = st.find("model.norm.weight");
  ASSERT_NE(info, nullptr);
  std::fstream f(dir / "model.safetensors", std::ios::binary | std::ios::in | std::ios::out);
  uint64_t header = 0;  // data start = 8 + header length (the safetensors layout)
  f.read(reinterpret_cast<char*>(&header), 8);
  const auto offset = static_cast<std::streamoff>(8 + header + info->begin);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.seekp(offset + 4 * 3);
  f.write(reinterpret_cast<const char*>(&nan), 4);
  f.close();
  expect_refused(dir.string(), "output_norm.weight holds a non-finite value");
  fs::remove_all(dir);
}

TEST(BadCheckpoints, BrokenConfigJson) {
  const fs::path dir = fixture_copy("bad_config");
  const std::pair<std::string, std::string> cases[] = {
      {"{\"model_type\": \"llama\", \"hidden_size\": \"sixty-four\"}", "hidden_size"},
      {"{\"model_type\": \"llama\"}", "hidden_size"},
      {"{\"model_type\": \"llama\", \"hidden_size\": 64,", "config.json"},
      {"[1, 2, 3]", "config.json"},
  };
  for (const auto& [text, needle] : cases) {
    std::ofstream(dir / "config.json", std::ios::trunc) << text;
    expect_refused(dir.string(), needle);
  }
  std::ofstream(dir / "config.json", std::ios::trunc) << "{\"model_type\": \"mamba\"}";
  Result<models::Model> m = models::open_model(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(m.error().message().find("mamba"), std::string::npos) << m.error().message();
  fs::remove_all(dir);
}

TEST(BadCheckpoints, BrokenTokenizerJson) {
  const fs::path dir = fixture_copy("bad_tokenizer");
  std::ofstream(dir / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\", \"vocab\": [1, 2]}}";
  expect_refused(dir.string(), "tokenizer.json");
  fs::remove_all(dir);
}

// A GGUF whose metadata disagrees with its tensors is refused when it is opened, naming the
// tensor, never traced into a crash: a width the tensors do not have, a layer that has no
// tensors, and a non-finite epsilon.
TEST(BadCheckpoints, GgufMetadataThatDisagreesWithItsTensors) {
  struct Case {
    const char* name;
    void (*mutate)(models::ModelConfig&);
    const char* needle;
  };
  const Case cases[] = {
      {"dim", [](models::ModelConfig& c) { c.dim = 65; }, "token_embd.weight"},
      {"layers", [](models::ModelConfig& c) { c.n_layers += 1; }, "blk.5."},
      {"eps", [](models::ModelConfig& c) { c.norm_eps = std::numeric_limits<double>::quiet_NaN(); }, "norm eps"},
  };
  for (const Case& c : cases) {
    models::Model m = testing::must(models::open_synthetic("llama-260k"));
    c.mutate(m.config);
    const fs::path p = scratch(str_cat("meta_", c.name, ".gguf"));
    ASSERT_TRUE(models::export_gguf(m, p.string()).ok()) << c.name;
    expect_refused(p.string(), c.needle);
    fs::remove(p);
  }
}

// Sizes beyond any model (a product that would not fit, or ask for terabytes) and a vocabulary
// larger than the embedding are refused at open, not allocated or run.
TEST(BadCheckpoints, ConfigSizesBeyondAnyModelOrItsTensors) {
  const fs::path dir = fixture_copy("huge_config");
  const std::string base = testing::read_file((dir / "config.json").string());
  auto with = [&](const std::string& key, const std::string& value) {
    const size_t at = base.find("\"" + key + "\"");
    EXPECT_NE(at, std::string::npos) << key;
    const size_t colon = base.find(':', at), end = base.find_first_of(",}", colon);
    std::ofstream(dir / "config.json", std::ios::trunc) << base.substr(0, colon + 1) << " " << value << base.substr(end);
  };
  with("hidden_size", "1099511627776");
  expect_refused(dir.string(), "dim");
  with("vocab_size", "129");  // one more token than the embedding has rows
  expect_refused(dir.string(), "vocab_size 129 exceeds the 128 rows of token_embd.weight");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvf
