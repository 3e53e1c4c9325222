// A generator's drawn steps (Generator::step_draw) against draw_row of the logits a twin
// generator's plain steps give, over the same seeded draws (a top-k 40 sampler with a
// repetition penalty): the same token at every step. Shared by the host executors' test and
// the GPU's.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "exec/row_draw.h"
#include "llm/generator.h"
#include "llm/sampler.h"
#include "testing.h"

namespace kvf::testing {

inline void expect_drawn_steps_match(const models::Model& m, llm::GeneratorOptions o, int steps) {
  o.last_logits = true;
  llm::Generator plain(m, 64, o), drawn(m, 64, o);
  const llm::SamplerConfig cfg{.temperature = 0.9, .top_k = 40, .repeat_penalty = 1.1, .seed = 11};
  llm::Sampler a(cfg), b(cfg);
  std::vector<int32_t> history{3, 1, 4, 1, 5}, in = history;
  for (int i = 0; i < steps; ++i) {
    const std::vector<float> logits = must(plain.step(in));
    exec::StepDraws da, db;
    da.rows.push_back(a.device_draw(history, history.size(), logits.size(), da.edits));
    db.rows.push_back(b.device_draw(history, history.size(), logits.size(), db.edits));
    const int32_t want = exec::draw_row(logits, da.rows[0], da.edits);
    ASSERT_EQ(must(drawn.step_draw(in, db)), want) << "step " << i;
    history.push_back(want);
    in = {want};
  }
}

}  // namespace kvf::testing
