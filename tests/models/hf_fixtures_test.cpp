// Every family against transformers: tiny random-init checkpoints made by
// tools/make_fixtures.py (tests/fixtures/<family>/). All-position logits within 1e-4
// relative, cached greedy ids equal to transformers' generate(use_cache=True), and cached
// decode equal to a full forward over 64 steps.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "load/npy.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

struct Fixture {
  std::string dir;
  std::vector<int32_t> input_ids, prompt_ids, greedy_ids;
  std::vector<double> margins;
  load::NpyArray logits;
};

std::string fixture_dir(const std::string& family) {
  const char* root = std::getenv("KVF_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/" + family;
}

Fixture read_fixture(const std::string& family) {
  Fixture f;
  f.dir = fixture_dir(family);
  std::ifstream in(f.dir + "/fixture.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    ADD_FAILURE() << "cannot read " << f.dir << "/fixture.json";
    return f;
  }
  f.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
  f.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  f.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
  f.margins = j.at("greedy_top2_margins").get<std::vector<double>>();
  f.logits = testing::must(load::read_npy_f32(f.dir + "/logits.npy"));
  return f;
}

models::Model open(const Fixture& f) {
  return testing::must(models::open_model(f.dir, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
}

std::span<const float> last_row(const std::vector<float>& logits, int64_t vocab) {
  return {logits.data() + logits.size() - static_cast<size_t>(vocab), static_cast<size_t>(vocab)};
}

// Every test runs on the compiled CPU executor and on the oracle.
class HfFixture : public ::testing::TestWithParam<std::tuple<const char*, llm::ExecutorKind>> {
 protected:
  const char* family() const { return std::get<0>(GetParam()); }
  llm::GeneratorOptions options() const {
    llm::GeneratorOptions o;
    o.executor = std::get<1>(GetParam());
    return o;
  }
};

TEST_P(HfFixture, AllPositionLogitsMatchTransformers) {
  const Fixture f = read_fixture(family());
  const models::Model m = open(f);
  llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()), options());
  Result<std::vector<float>> got = gen.step(f.input_ids);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(f.logits.shape, (Shape{static_cast<int64_t>(f.input_ids.size()), m.config.vocab}));
  const std::vector<double> ours(got->begin(), got->end()), ref(f.logits.values.begin(), f.logits.values.end());
  const double rel = testing::rel_error(ours, ref), max_abs = testing::max_abs_diff(ours, ref);
  std::printf("[ logits   ] %s: rel %.2e, max |diff| %.2e\n", family(), rel, max_abs);
  EXPECT_LE(rel, 1e-4) << "max |diff| " << max_abs;
}

TEST_P(HfFixture, CachedGreedyIdsMatchTransformers) {
  const Fixture f = read_fixture(family());
  const models::Model m = open(f);
  llm::Generator gen(m, 64, options());
  Result<std::vector<float>> logits = gen.step(f.prompt_ids);
  ASSERT_TRUE(logits.ok()) << logits.error().to_string();
  for (size_t i = 0; i < f.greedy_ids.size(); ++i) {
    const int32_t next = llm::argmax(last_row(*logits, m.config.vocab));
    if (next != f.greedy_ids[i]) {
      // Allowed only where transformers' own top-2 margin is inside float noise; after that
      // the sequences legitimately part.
      EXPECT_LT(f.margins[i], 1e-4) << "step " << i << ": kvforge " << next << ", transformers " << f.greedy_ids[i];
      return;
    }
    logits = gen.step({next});
    ASSERT_TRUE(logits.ok()) << logits.error().to_string();
  }
}

TEST_P(HfFixture, CachedDecodeEqualsFullForwardOver64Steps) {
  const Fixture f = read_fixture(family());
  const models::Model m = open(f);
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < 65; ++i) ids.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(m.config.vocab - 3)));
  const ir::Graph full = testing::must(m.trace_step({.n_tokens = 65, .capacity = 0, .cached = false}));
  std::vector<int32_t> pos(ids.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  Result<eval::Outputs> ref = testing::run_graph(
      full, {{ir::Slot::kToken, testing::must(eval::Buffer::i32({65}, ids))}, {ir::Slot::kPos, testing::must(eval::Buffer::i32({65}, pos))}},
      eval::Precision::kNative);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const eval::Buffer& full_logits = ref->at("logits");
  llm::Generator gen(m, 65, options());
  Result<std::vector<float>> step = gen.step({ids[0]});
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  double worst = 0;
  for (int64_t p = 1; p <= 64; ++p) {  // 64 cached decode steps
    step = gen.step({ids[static_cast<size_t>(p)]});
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    for (int64_t v = 0; v < m.config.vocab; ++v) {
      const double d = std::fabs((*step)[static_cast<size_t>(v)] - full_logits.data[static_cast<size_t>(p * m.config.vocab + v)]);
      worst = std::max(worst, std::isnan(d) ? 1e30 : d);
    }
  }
  std::printf("[ cached   ] %s: max |full - cached| over 64 steps %.2e\n", family(), worst);
  EXPECT_LE(worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFixture,
                         ::testing::Combine(::testing::Values("llama", "llama3_scaled", "mistral", "qwen2", "qwen3",
                                                              "gemma2", "gpt2", "bloom", "deepseek_v2",
                                                              "deepseek_v2_qlora"),
                                            ::testing::Values(llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle)),
                         [](const auto& info) {
                           return str_cat(std::get<0>(info.param),
                                          std::get<1>(info.param) == llm::ExecutorKind::kCpu ? "_cpu" : "_oracle");
                         });

// Routed-MoE layers are not traced yet: the checkpoint is refused with a typed error naming
// the cause, never run with its experts ignored.
TEST(HfFixtureRefusal, DeepseekMoeLayersAreRefused) {
  Result<models::Model> m = models::open_model(fixture_dir("deepseek_v2_moe"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(m.error().message().find("routed-MoE"), std::string::npos) << m.error().message();
}

}  // namespace
}  // namespace kvf
