// The family registry: every name a checkpoint can give leads to exactly one family, every
// fixture opens as the family its config.json names, and a name no family has is refused
// with the list of those that exist.
#include "models/gguf_codec.h"
#include "models/registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "load/gguf_writer.h"
#include "testing.h"

namespace kvf {
namespace {

namespace fs = std::filesystem;

TEST(Registry, EveryNameLeadsToOneFamily) {
  std::set<std::string_view> archs, hf_types, gguf_archs;
  for (const models::Family& f : models::families()) {
    EXPECT_TRUE(archs.insert(f.arch).second) << f.arch;
    EXPECT_EQ(models::family_by_arch(f.arch), &f);
    ASSERT_NE(f.trace, nullptr) << f.arch;
    ASSERT_NE(f.hf_config, nullptr) << f.arch;
    ASSERT_NE(f.hf_names, nullptr) << f.arch;
    for (std::string_view t : f.hf_types) {
      EXPECT_TRUE(hf_types.insert(t).second) << t;
      EXPECT_EQ(models::family_by_hf_type(t), &f);
    }
    // A GGUF name comes with its codec, and only then; a name shared by several families
    // (llama.cpp's llama holds mistral and mixtral) reads as the first, which traces the same.
    EXPECT_EQ(f.gguf_arch.empty(), f.gguf == nullptr) << f.arch;
    if (!f.gguf_arch.empty()) {
      ASSERT_NE(f.gguf->read_config, nullptr) << f.arch;
      const models::Family* reader = models::family_by_gguf_arch(f.gguf_arch);
      if (gguf_archs.insert(f.gguf_arch).second) EXPECT_EQ(reader, &f);
      else EXPECT_EQ(reader->trace, f.trace) << f.arch;
    }
  }
  EXPECT_EQ(models::family_by_arch("falcon"), nullptr);
  EXPECT_EQ(models::family_by_hf_type("deepseek2"), nullptr);  // the arch key is not a model_type
  EXPECT_EQ(models::family_by_arch("deepseek2"), models::family_by_hf_type("deepseek_v2"));
  EXPECT_EQ(models::family_by_gguf_arch(""), nullptr);
}

TEST(Registry, KnownFamiliesListsEachKey) {
  EXPECT_EQ(models::known_families(models::FamilyKey::kArch),
            "llama, mistral, qwen2, qwen3, qwen3moe, qwen2moe, mixtral, phi3, gemma2, gemma3, gpt2, bloom, deepseek2, deepseek3, deepseek32");
  EXPECT_EQ(models::known_families(models::FamilyKey::kHfType),
            "llama, mistral, qwen2, qwen3, qwen3_moe, qwen2_moe, mixtral, phi3, gemma2, gemma3_text, gpt2, bloom, deepseek_v2, deepseek_v3, deepseek_v32");
  EXPECT_EQ(models::known_families(models::FamilyKey::kGguf), "llama, qwen2, qwen3, qwen3moe, qwen2moe, phi3, gemma2, gemma3, gpt2, bloom, deepseek2, deepseek32");
}

// Each fixture checkpoint opens as the family its model_type names, with that family's
// tracer and position rule (the mixture-of-experts fixture is refused until experts run).
TEST(Registry, FixturesOpenAsTheFamilyTheirConfigNames) {
  const fs::path root = testing::source_dir() + "/tests/fixtures";
  int opened = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    std::ifstream in(e.path() / "config.json");
    if (!in) continue;
    const std::string type = nlohmann::json::parse(in).at("model_type").get<std::string>();
    SCOPED_TRACE(e.path().filename().string());
    const models::Family* f = models::family_by_hf_type(type);
    Result<models::Model> m = models::open_model(e.path().string(), {.with_tokenizer = false});
    if (f == nullptr) {  // a fixture of a family not supported yet is refused, naming its type
      ASSERT_FALSE(m.ok());
      EXPECT_NE(m.error().message().find(type), std::string::npos) << m.error().to_string();
      continue;
    }
    if (!m.ok() && e.path().filename().string().ends_with("_moe")) {
      EXPECT_EQ(m.error().code(), ErrorCode::kUnsupported) << m.error().to_string();
      continue;
    }
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    EXPECT_EQ(m->config.arch, f->arch);
    EXPECT_EQ(m->config.learned_positions, f->learned_positions);
    ++opened;
  }
  EXPECT_GE(opened, 8);
}

TEST(Registry, AGgufArchitectureWithoutAReaderIsRefusedNamingTheReadersThereAre) {
  const std::string path = (fs::temp_directory_path() / str_cat("kvf_registry_", testing::test_seed(), ".gguf")).string();
  load::GgufWriter w;
  w.set_string("general.architecture", "falcon");
  ASSERT_TRUE(w.write(path).ok());
  Result<models::Model> m = models::open_model(path);
  fs::remove(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(m.error().message().find("GGUF architecture 'falcon' is not supported (GGUF: llama, qwen2, qwen3, qwen3moe, qwen2moe, phi3, gemma2, gemma3, gpt2, bloom, deepseek2, deepseek32;"),
            std::string::npos)
      << m.error().to_string();
}

}  // namespace
}  // namespace kvf
