// The transformers fixtures (tests/fixtures/<family>/, made by tools/make_fixtures.py): the
// ids, the reference logits and greedy continuation, and the checkpoint opened as a Model.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/oracle.h"
#include "llm/generator.h"
#include "llm/sampler.h"
#include "load/npy.h"
#include "models/model.h"
#include "testing.h"

namespace kvf::testing {

struct Fixture {
  std::string dir;
  std::string model;  // the checkpoint the reference was made from: dir, or the file fixture.json names
  std::vector<int32_t> input_ids, prompt_ids, greedy_ids;
  std::vector<double> margins;
  load::NpyArray logits;
};

inline Fixture read_fixture(const std::string& family) {
  Fixture f;
  f.dir = fixture_dir(family);
  std::ifstream in(f.dir + "/fixture.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) {
    ADD_FAILURE() << "cannot read " << f.dir << "/fixture.json";
    return f;
  }
  f.model = j.contains("model") ? source_dir() + "/" + j.at("model").get<std::string>() : f.dir;
  f.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
  f.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  f.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
  f.margins = j.at("greedy_top2_margins").get<std::vector<double>>();
  f.logits = must(load::read_npy_f32(f.dir + "/logits.npy"));
  return f;
}

inline models::Model open_fixture(const Fixture& f) {
  return must(models::open_model(f.model, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
}

// All-position logits of one prefill of m (the fixture's checkpoint, or that checkpoint in
// another format) within `rel_tol` (relative L2) of transformers'.
inline void expect_logits_match(const Fixture& f, const models::Model& m, const char* family,
                                const llm::GeneratorOptions& options, double rel_tol) {
  llm::Generator gen(m, static_cast<int64_t>(f.input_ids.size()), options);
  Result<std::vector<float>> got = gen.step(f.input_ids);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(f.logits.shape, (Shape{static_cast<int64_t>(f.input_ids.size()), m.config.vocab}));
  const std::vector<double> ours(got->begin(), got->end()), ref(f.logits.values.begin(), f.logits.values.end());
  const double rel = rel_error(ours, ref), max_abs = max_abs_diff(ours, ref);
  std::printf("[ logits   ] %s: rel %.2e, max |diff| %.2e\n", family, rel, max_abs);
  EXPECT_LE(rel, rel_tol) << "max |diff| " << max_abs;
}

inline void expect_logits_match(const char* family, const llm::GeneratorOptions& options, double rel_tol) {
  const Fixture f = read_fixture(family);
  expect_logits_match(f, open_fixture(f), family, options, rel_tol);
}

// Cached greedy decoding of m gives transformers' generate(use_cache=True) ids.
inline void expect_greedy_ids_match(const Fixture& f, const models::Model& m, const llm::GeneratorOptions& options) {
  llm::Generator gen(m, 64, options);
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

inline void expect_greedy_ids_match(const char* family, const llm::GeneratorOptions& options) {
  const Fixture f = read_fixture(family);
  expect_greedy_ids_match(f, open_fixture(f), options);
}

// 64 cached decode steps within `abs_tol` of the oracle's uncached full forward, in units of
// the step's largest logit where that is above 1 (a trained model's logits of 15 carry f32
// rounding of 1e-6 of that: the random fixtures' stay below 1).
inline void expect_cached_equals_full(const char* family, const llm::GeneratorOptions& options, double abs_tol) {
  const Fixture f = read_fixture(family);
  const models::Model m = open_fixture(f);
  const uint64_t seed = test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < 65; ++i) ids.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(m.config.vocab - 3)));
  const ir::Graph full = must(m.trace_step({.n_tokens = 65, .capacity = 0, .cached = false}));
  std::vector<int32_t> pos(ids.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  Result<eval::Outputs> ref = run_graph(
      full, {{ir::Slot::kToken, must(eval::Buffer::i32({65}, ids))}, {ir::Slot::kPos, must(eval::Buffer::i32({65}, pos))}},
      eval::Precision::kNative);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const eval::Buffer& full_logits = ref->at("logits");
  llm::Generator gen(m, 65, options);
  Result<std::vector<float>> step = gen.step({ids[0]});
  ASSERT_TRUE(step.ok()) << step.error().to_string();
  double worst = 0;
  for (int64_t p = 1; p <= 64; ++p) {  // 64 cached decode steps
    step = gen.step({ids[static_cast<size_t>(p)]});
    ASSERT_TRUE(step.ok()) << step.error().to_string();
    double scale = 1, diff = 0;
    for (int64_t v = 0; v < m.config.vocab; ++v) {
      const double want = full_logits.data[static_cast<size_t>(p * m.config.vocab + v)];
      const double d = std::fabs((*step)[static_cast<size_t>(v)] - want);
      diff = std::max(diff, std::isnan(d) ? 1e30 : d);
      scale = std::max(scale, std::fabs(want));
    }
    worst = std::max(worst, diff / scale);
  }
  std::printf("[ cached   ] %s: max |full - cached| / max(1, max |logit|) over 64 steps %.2e\n", family, worst);
  EXPECT_LE(worst, abs_tol);
}

}  // namespace kvf::testing
