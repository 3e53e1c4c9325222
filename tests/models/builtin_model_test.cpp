// The built-in model's tokenizer (models/kjv-7m.gguf; docs in models/README.md): the
// committed GGUF encodes as tools/kjv/prepare.py, the script that trained it, does
// (tests/fixtures/kjv/tokenizer.json), decodes back to the text, and its byte-level BPE
// vocabulary survives a GGUF export unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hf_fixture.h"
#include "models/export_gguf.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

const std::string& builtin_path() {
  static const std::string path = testing::source_dir() + "/models/kjv-7m.gguf";
  return path;
}

models::Model open_builtin() { return testing::must(models::open_model(builtin_path())); }

TEST(BuiltinModel, EncodesEveryCaseAsItsTrainerDid) {
  const models::Model m = open_builtin();
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab().kind, load::VocabKind::kBpe);
  std::ifstream in(testing::fixture_dir("kjv") + "/tokenizer.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  ASSERT_GE(j.at("cases").size(), 2u);
  for (const nlohmann::json& c : j.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const std::vector<int32_t> want = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(m.tokenizer->encode(text, /*add_special=*/false), want) << "text: " << text.substr(0, 80);
    EXPECT_EQ(m.tokenizer->decode(want), text);
  }
}

TEST(BuiltinModel, ThePromptOfTheMainJobEncodesAsInTheFixture) {
  const models::Model m = open_builtin();
  const testing::Fixture f = testing::read_fixture("kjv");
  // add_special: the vocabulary asks for no BOS, so none is added.
  EXPECT_EQ(m.tokenizer->encode("And it came to pass", /*add_special=*/true), f.prompt_ids);
}

TEST(BuiltinModel, AnyBytesRoundTrip) {
  const models::Model m = open_builtin();
  const std::string texts[] = {"Grüße, 世界! 🙂 naïve café", std::string("\x00\x01\xff\xfe bytes", 10), "\r\n\t  \v"};
  for (const std::string& t : texts) EXPECT_EQ(m.tokenizer->decode(m.tokenizer->encode(t, false)), t);
}

TEST(BuiltinModel, ByteLevelVocabularySurvivesGgufExport) {
  const models::Model m = open_builtin();
  const std::string out =
      (std::filesystem::temp_directory_path() / str_cat("kvf_builtin_export_", ::getpid(), ".gguf")).string();
  ASSERT_TRUE(models::export_gguf(m, out).ok());
  const models::Model again = testing::must(models::open_model(out));
  std::filesystem::remove(out);
  ASSERT_NE(again.tokenizer, nullptr);
  const load::Vocab &a = m.tokenizer->vocab(), &b = again.tokenizer->vocab();
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.pieces, b.pieces);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.add_bos, b.add_bos);
}

}  // namespace
}  // namespace kvf
