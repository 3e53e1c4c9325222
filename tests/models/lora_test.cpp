// LoRA adapters against PEFT on tests/fixtures/llama_lora (a llama base and two adapters of
// different ranks and targets, made by tools/make_fixtures.py with transformers + peft):
// all-position logits and greedy ids of each adapter through the compiled CPU step and the
// oracle; the base model's rows through a step that holds adapters equal the plain model's;
// adapter a1 as llama.cpp's convert_lora_to_gguf.py writes it (adapters/a1.gguf), on the
// HF base and on the base written to GGUF; and what the loader refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "hf_fixture.h"
#include "models/export_gguf.h"
#include "models/lora.h"
#include "models/lora_trace.h"

namespace kvf {
namespace {

using testing::must;

struct AdapterRef {
  std::string name;
  std::vector<int32_t> greedy;
  std::vector<double> margins;
  load::NpyArray logits;
};

std::vector<AdapterRef> adapter_refs(const std::string& dir) {
  std::ifstream in(dir + "/fixture.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  std::vector<AdapterRef> out;
  for (const auto& [name, a] : j.at("adapters").items()) {
    out.push_back({name, a.at("greedy_ids").get<std::vector<int32_t>>(), a.at("greedy_top2_margins").get<std::vector<double>>(),
                   must(load::read_npy_f32(dir + "/" + a.at("logits").get<std::string>()))});
  }
  return out;
}

class LoraFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
    for (const AdapterRef& r : refs) {
      adapters.push_back(std::make_shared<models::LoraAdapter>(must(models::load_lora(f.dir + "/adapters/" + r.name, m, r.name))));
    }
    set = models::LoraSet(std::move(adapters));
  }
  // adapter 0: the base model's reference; i: adapter i's.
  const load::NpyArray& want(int adapter) const {
    return adapter == 0 ? f.logits : refs[static_cast<size_t>(adapter - 1)].logits;
  }

  testing::Fixture f = testing::read_fixture("llama_lora");
  models::Model m = testing::open_fixture(f);
  std::vector<AdapterRef> refs = adapter_refs(f.dir);
  models::LoraSet set;
};

TEST_F(LoraFixture, EachAdapterLoadsItsTargetsAtItsScale) {
  ASSERT_EQ(set.adapters().size(), 2u);
  const models::LoraAdapter &a1 = *set.adapters()[0], &a2 = *set.adapters()[1];
  EXPECT_EQ(a1.rank, 8);
  EXPECT_DOUBLE_EQ(a1.scale, 16.0 / 8.0);  // lora_alpha / r
  EXPECT_EQ(a1.targets.size(), 7u * 2u);   // seven projections of two layers
  EXPECT_EQ(a2.rank, 4);
  EXPECT_DOUBLE_EQ(a2.scale, 8.0 / 2.0);   // rsLoRA: lora_alpha / sqrt(r)
  EXPECT_EQ(a2.targets.size(), 3u * 2u);
  EXPECT_TRUE(a2.targets.count("blk.1.ffn_down.weight"));
  EXPECT_EQ(a1.targets.at("blk.0.attn_q.weight").a.shape(), (Shape{8, 64}));
  EXPECT_EQ(a1.targets.at("blk.0.attn_k.weight").b.shape(), (Shape{32, 8}));
}

TEST_F(LoraFixture, AllPositionLogitsOfEachAdapterMatchPeft) {
  for (llm::ExecutorKind executor : {llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle}) {
    for (int adapter = 0; adapter <= 2; ++adapter) {
      SCOPED_TRACE(str_cat(executor == llm::ExecutorKind::kCpu ? "cpu" : "oracle", ", adapter ", adapter));
      llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()),
                         {.executor = executor, .threads = 2, .lora = &set, .adapter = adapter});
      const std::vector<float> got = must(gen.step(f.input_ids));
      const load::NpyArray& ref = want(adapter);
      ASSERT_EQ(got.size(), ref.values.size());
      const double rel = testing::rel_error(std::vector<double>(got.begin(), got.end()),
                                            std::vector<double>(ref.values.begin(), ref.values.end()));
      std::printf("[ lora     ] adapter %d: rel %.2e\n", adapter, rel);
      EXPECT_LE(rel, 1e-4);
    }
  }
}

TEST_F(LoraFixture, GreedyIdsOfEachAdapterMatchPeft) {
  for (int adapter = 1; adapter <= 2; ++adapter) {
    SCOPED_TRACE(str_cat("adapter ", adapter));
    const AdapterRef& r = refs[static_cast<size_t>(adapter - 1)];
    testing::Fixture g = f;
    g.greedy_ids = r.greedy;
    g.margins = r.margins;
    testing::expect_greedy_ids_match(g, m, {.threads = 2, .lora = &set, .adapter = adapter});
  }
}

TEST_F(LoraFixture, BaseRowsThroughAdapterStepsEqualThePlainModel) {
  llm::Generator plain(m, 48, {.threads = 2});
  llm::Generator through(m, 48, {.threads = 2, .lora = &set, .adapter = 0});
  EXPECT_EQ(must(plain.step(f.input_ids)), must(through.step(f.input_ids)));
}

TEST_F(LoraFixture, AnAdapterIdPastTheSetIsRefused) {
  llm::Generator gen(m, 48, {.threads = 2, .lora = &set, .adapter = 3});
  Result<std::vector<float>> r = gen.step({5, 6, 7});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.error().to_string().find("adapter 3"), std::string::npos) << r.error().to_string();
}

TEST_F(LoraFixture, ContentHashFollowsTheFactorsNotTheName) {
  const models::LoraAdapter again = must(models::load_lora(f.dir + "/adapters/a1", m, "other"));
  EXPECT_EQ(again.content_hash, set.adapters()[0]->content_hash);
  EXPECT_NE(set.adapters()[0]->content_hash, set.adapters()[1]->content_hash);
}

// Logits of all the fixture's positions through `m` with `set`'s adapter 1.
double adapter_one_error(const testing::Fixture& f, const models::Model& m, const models::LoraSet& set,
                         const load::NpyArray& want) {
  llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()), {.threads = 2, .lora = &set, .adapter = 1});
  const std::vector<float> got = must(gen.step(f.input_ids));
  return testing::rel_error(std::vector<double>(got.begin(), got.end()),
                            std::vector<double>(want.values.begin(), want.values.end()));
}

TEST_F(LoraFixture, LlamaCppsGgufOfAnAdapterHoldsItsPeftFactors) {
  const models::LoraAdapter g = must(models::load_lora(f.dir + "/adapters/a1.gguf", m, "a1"));
  const models::LoraAdapter& p = *set.adapters()[0];
  EXPECT_EQ(g.rank, p.rank);
  EXPECT_DOUBLE_EQ(g.scale, p.scale);
  ASSERT_EQ(g.targets.size(), p.targets.size());
  for (const auto& [name, fp] : p.targets) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(g.targets.count(name));
    const models::LoraFactors& fg = g.targets.at(name);
    EXPECT_EQ(must(fg.a.to_f32()), must(fp.a.to_f32()));
    EXPECT_EQ(must(fg.b.to_f32()), must(fp.b.to_f32())) << "q/k rows back from llama.cpp's rope pairs";
  }
  EXPECT_EQ(g.content_hash, p.content_hash);
  models::LoraSet only{{std::make_shared<models::LoraAdapter>(g)}};
  EXPECT_LE(adapter_one_error(f, m, only, refs[0].logits), 1e-4);
}

TEST_F(LoraFixture, LlamaCppsGgufOfAnAdapterOnTheBaseWrittenToGguf) {
  const std::string path = testing::temp_dir("lora_base") + "/base.gguf";
  ASSERT_TRUE(models::export_gguf(m, path, {.outtype = DType::kF32}).ok());
  const models::Model base = must(models::open_model(path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
  models::LoraSet only{{std::make_shared<models::LoraAdapter>(must(models::load_lora(f.dir + "/adapters/a1.gguf", base, "a1")))}};
  EXPECT_LE(adapter_one_error(f, base, only, refs[0].logits), 1e-4) << "q/k rows kept in pairs, as the base's";
  // The PEFT adapter on the same GGUF base: its q/k rows laid into the base's pairs.
  models::LoraSet peft{{std::make_shared<models::LoraAdapter>(must(models::load_lora(f.dir + "/adapters/a1", base, "a1")))}};
  EXPECT_LE(adapter_one_error(f, base, peft, refs[0].logits), 1e-4) << "a PEFT adapter's q/k rows into the GGUF base's pairs";
}

// A copy of adapter a2 with its adapter_config.json edited by `edit`.
std::string edited_adapter(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const std::string src = testing::fixture_dir("llama_lora") + "/adapters/a2", dst = testing::temp_dir(name);
  fs::copy_file(src + "/adapter_model.safetensors", dst + "/adapter_model.safetensors", fs::copy_options::overwrite_existing);
  nlohmann::json cfg = nlohmann::json::parse(testing::read_file(src + "/adapter_config.json"));
  edit(cfg);
  testing::write_file(dst + "/adapter_config.json", cfg.dump());
  return dst;
}

TEST(LoraLoad, WhatPlainLoraCannotHoldIsRefused) {
  const models::Model m = testing::open_test_model("llama_lora");
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    ErrorCode code;
    const char* says;
  };
  const Case cases[] = {
      {"modules_to_save", [](nlohmann::json& c) { c["modules_to_save"] = {"lm_head"}; }, ErrorCode::kUnsupported, "modules_to_save"},
      {"dora", [](nlohmann::json& c) { c["use_dora"] = true; }, ErrorCode::kUnsupported, "use_dora"},
      {"ia3", [](nlohmann::json& c) { c["peft_type"] = "IA3"; }, ErrorCode::kUnsupported, "IA3"},
      {"bias", [](nlohmann::json& c) { c["bias"] = "all"; }, ErrorCode::kUnsupported, "bias"},
      {"rank_pattern", [](nlohmann::json& c) { c["rank_pattern"] = {{"q_proj", 2}}; }, ErrorCode::kUnsupported, "rank_pattern"},
      {"wrong_rank", [](nlohmann::json& c) { c["r"] = 5; }, ErrorCode::kInvalidInput, "at rank 5"},
      {"no_rank", [](nlohmann::json& c) { c.erase("r"); }, ErrorCode::kInvalidInput, "r must be"},
      {"alpha_past_f32", [](nlohmann::json& c) { c["lora_alpha"] = 1e300; }, ErrorCode::kInvalidInput, "not a finite f32"},
      {"type_not_string", [](nlohmann::json& c) { c["peft_type"] = {1, 2}; }, ErrorCode::kInvalidInput, "peft_type must be a string"},
      {"rslora_not_bool", [](nlohmann::json& c) { c["use_rslora"] = "yes"; }, ErrorCode::kInvalidInput, "use_rslora must be a boolean"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<models::LoraAdapter> r = models::load_lora(edited_adapter(c.name, c.edit), m, "x");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), c.code);
    EXPECT_NE(r.error().to_string().find(c.says), std::string::npos) << r.error().to_string();
  }
  // An adapter made for another model: the base's shapes do not fit its factors.
  const models::Model other = testing::open_test_model("qwen3");
  Result<models::LoraAdapter> r = models::load_lora(testing::fixture_dir("llama_lora") + "/adapters/a1", other, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(r.error().to_string().find("base weight"), std::string::npos) << r.error().to_string();
  // Not an adapter at all.
  Result<models::LoraAdapter> none = models::load_lora(testing::temp_dir("lora_none"), m, "x");
  EXPECT_FALSE(none.ok());
}

}  // namespace
}  // namespace kvf
