// Paged steps against the contiguous single-sequence path: several sequences of different
// lengths, their K/V in shared per-layer pools through shuffled 16-token blocks, prefilled
// in one padded batch step and decoded together; every row's logits must equal that
// sequence run alone on a contiguous cache. Then the map contract: a bad read or write map
// is refused before anything runs and leaves the pools as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>

#include "llm/generator.h"
#include "llm/sampler.h"
#include "llm/step_runner.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

constexpr int64_t kBlock = 16;

// Each row owns cap / 16 blocks of one pool, drawn in shuffled order.
struct Pages {
  int64_t rows = 0, cap = 0, pool_slots = 0;
  std::vector<std::vector<int32_t>> blocks;
  int32_t slot(int64_t row, int64_t pos) const {
    return static_cast<int32_t>(blocks[static_cast<size_t>(row)][static_cast<size_t>(pos / kBlock)] * kBlock + pos % kBlock);
  }
  std::vector<int32_t> read_map() const {
    std::vector<int32_t> m;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < cap; ++p) m.push_back(slot(r, p));
    return m;
  }
  // Every column holds its own position: the read map is the logical one.
  std::vector<int32_t> key_positions() const {
    std::vector<int32_t> m;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < cap; ++p) m.push_back(static_cast<int32_t>(p));
    return m;
  }
};

Pages make_pages(int64_t rows, int64_t cap, std::mt19937_64& rng) {
  Pages p;
  p.rows = rows;
  p.cap = cap;
  const int64_t per_row = cap / kBlock, spare = 3;  // spare blocks nobody owns
  std::vector<int32_t> ids(static_cast<size_t>(rows * per_row + spare));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.pool_slots = static_cast<int64_t>(ids.size()) * kBlock;
  for (int64_t r = 0; r < rows; ++r) {
    p.blocks.emplace_back(ids.begin() + r * per_row, ids.begin() + (r + 1) * per_row);
  }
  return p;
}

// One padded batch step: row r feeds tokens[r] at positions start[r].., padded to the
// longest by repeating its last token and position (the copies write nothing).
struct Batch {
  models::StepSpec spec;
  exec::SlotValues slots;
};

Batch make_batch(const Pages& pages, const std::vector<std::vector<int32_t>>& tokens, const std::vector<int64_t>& start,
                 DType kv) {
  int64_t t = 0;
  for (const auto& row : tokens) t = std::max<int64_t>(t, static_cast<int64_t>(row.size()));
  Batch b;
  b.spec.n_tokens = t;
  b.spec.capacity = pages.cap;
  b.spec.cached = true;
  b.spec.last_logits = true;
  b.spec.kv_dtype = kv;
  b.spec.pool_slots = pages.pool_slots;
  b.spec.rows = pages.rows;
  std::vector<int32_t> ids, pos, write;
  for (int64_t r = 0; r < pages.rows; ++r) {
    const auto& row = tokens[static_cast<size_t>(r)];
    const auto n = static_cast<int64_t>(row.size());
    for (int64_t j = 0; j < t; ++j) {
      const int64_t i = std::min(j, n - 1), p = start[static_cast<size_t>(r)] + i;
      ids.push_back(row[static_cast<size_t>(i)]);
      pos.push_back(static_cast<int32_t>(p));
      write.push_back(j < n ? pages.slot(r, p) : -1);
    }
  }
  b.slots = {{ir::Slot::kToken, ids}, {ir::Slot::kPos, pos}, {ir::Slot::kWriteMap, write},
             {ir::Slot::kSlotMap, pages.read_map()}, {ir::Slot::kKeyPos, pages.key_positions()}};
  return b;
}

std::vector<double> row_of(const std::vector<float>& logits, int64_t row, int64_t vocab) {
  const auto* p = logits.data() + row * vocab;
  return std::vector<double>(p, p + vocab);
}

using Param = std::tuple<const char*, llm::ExecutorKind, DType>;
class PagedStep : public ::testing::TestWithParam<Param> {};

TEST_P(PagedStep, BatchedRowsEqualEachSequenceAlone) {
  const auto [name, executor, kv] = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = testing::open_test_model(name);
  const int64_t vocab = m.config.vocab, cap = 32, decodes = 4;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t len : {5, 1, 17, 3}) prompts.push_back(testing::random_ids(rng, len, vocab));
  const auto rows = static_cast<int64_t>(prompts.size());

  // Each sequence alone: prefill, then greedy decodes; the ids drive the batch below too.
  std::vector<std::vector<std::vector<double>>> want(prompts.size());
  std::vector<std::vector<int32_t>> next(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r) {
    llm::GeneratorOptions o;
    o.executor = executor;
    o.kv_dtype = kv;
    o.last_logits = true;
    o.threads = 2;
    llm::Generator solo(m, cap, o);
    std::vector<int32_t> in = prompts[r];
    for (int64_t s = 0; s <= decodes; ++s) {
      const std::vector<float> logits = testing::must(solo.step(in));
      want[r].push_back(row_of(logits, 0, vocab));
      in = {llm::argmax(logits)};
      next[r].push_back(in[0]);
    }
  }

  const Pages pages = make_pages(rows, cap, rng);
  llm::StepRunner runner(m, {.executor = executor, .precision = eval::Precision::kNative, .threads = 2, .skip_passes = {}});
  std::vector<std::vector<int32_t>> in = prompts;
  std::vector<int64_t> start(prompts.size(), 0);
  const double tol = kv == DType::kF16 ? 1e-3 : 1e-5;
  for (int64_t s = 0; s <= decodes; ++s) {
    const Batch b = make_batch(pages, in, start, kv);
    const std::span<const float> run = testing::must(runner.run(b.spec, b.slots));
    const std::vector<float> logits(run.begin(), run.end());
    ASSERT_EQ(static_cast<int64_t>(logits.size()), rows * vocab);
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double>& alone = want[static_cast<size_t>(r)][static_cast<size_t>(s)];
      EXPECT_LE(testing::rel_error(row_of(logits, r, vocab), alone), tol) << name << " row " << r << " step " << s;
      EXPECT_EQ(row_of(logits, r, vocab), alone) << name << " row " << r << " step " << s << ": not the same bits";
      start[static_cast<size_t>(r)] += static_cast<int64_t>(in[static_cast<size_t>(r)].size());
      in[static_cast<size_t>(r)] = {next[static_cast<size_t>(r)][static_cast<size_t>(s)]};
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string s = testing::as_test_name(std::get<0>(info.param));
  s += std::get<1>(info.param) == llm::ExecutorKind::kCpu ? "_cpu" : "_oracle";
  return s + (std::get<2>(info.param) == DType::kF16 ? "_f16kv" : "");
}

INSTANTIATE_TEST_SUITE_P(Families, PagedStep,
                         ::testing::Combine(::testing::Values("synthetic:llama-260k", "llama", "llama3_scaled", "mistral",
                                                              "qwen2", "qwen3", "gemma2", "gpt2", "bloom", "deepseek_v2",
                                                              "deepseek_v32"),
                                            ::testing::Values(llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle),
                                            ::testing::Values(DType::kF32)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(F16Cache, PagedStep,
                         ::testing::Combine(::testing::Values("synthetic:llama-260k", "gemma2", "deepseek_v2", "deepseek_v32"),
                                            ::testing::Values(llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle),
                                            ::testing::Values(DType::kF16)),
                         param_name);

// A refused map leaves the pools untouched: the same good step afterwards gives the same
// logits as on a runner that never saw the bad one.
TEST(PagedMaps, BadMapsAreRefusedBeforeAnythingRuns) {
  std::mt19937_64 rng(testing::test_seed());
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const Pages pages = make_pages(2, 32, rng);
  const std::vector<std::vector<int32_t>> prompt{{1, 2, 3}, {4, 5}};
  for (llm::ExecutorKind ex : {llm::ExecutorKind::kCpu, llm::ExecutorKind::kOracle}) {
    llm::StepRunner clean(m, {.executor = ex, .precision = eval::Precision::kNative, .threads = 2, .skip_passes = {}});
    llm::StepRunner tried(m, {.executor = ex, .precision = eval::Precision::kNative, .threads = 2, .skip_passes = {}});
    const Batch good = make_batch(pages, prompt, {0, 0}, DType::kF32);
    EXPECT_FALSE(testing::must(clean.run(good.spec, good.slots)).empty());
    ASSERT_TRUE(tried.run(good.spec, good.slots).ok());

    auto refused = [&](exec::SlotValues slots, const std::string& what, ErrorCode code = ErrorCode::kInvalidInput) {
      Result<std::span<const float>> r = tried.run(good.spec, slots);
      ASSERT_FALSE(r.ok()) << what;
      EXPECT_EQ(r.error().code(), code) << what;
      EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().to_string();
    };
    exec::SlotValues bad = good.slots;
    bad[ir::Slot::kSlotMap][5] = static_cast<int32_t>(pages.pool_slots);
    refused(bad, "read map: row 0, position 5 names slot");
    bad = good.slots;
    bad[ir::Slot::kSlotMap][40] = -1;
    refused(bad, "read map: row 1, position 8 names slot -1");
    bad = good.slots;
    bad[ir::Slot::kWriteMap][0] = static_cast<int32_t>(pages.pool_slots + 7);
    refused(bad, "write map: token 0 names slot");
    bad = good.slots;
    bad[ir::Slot::kWriteMap][4] = bad[ir::Slot::kWriteMap][0];  // row 1's first token onto row 0's slot
    refused(bad, "is named twice");
    // Row 1 at positions 0..1 while its key positions start at 2: its read row does not
    // hold the position it queries (what a position past a logical map's width was).
    bad = good.slots;
    for (int64_t c = 0; c < pages.cap; ++c) bad[ir::Slot::kKeyPos][static_cast<size_t>(pages.cap + c)] += 2;
    refused(bad, "a read row holds its row's last position", ErrorCode::kValidation);

    // Decode one token on both: equal only if the refused steps wrote nothing.
    const Batch dec = make_batch(pages, {{7}, {8}}, {3, 2}, DType::kF32);
    // A run's logits live until the runner's next run: each is copied before the other runs.
    const std::span<const float> a_run = testing::must(clean.run(dec.spec, dec.slots));
    const std::vector<float> a(a_run.begin(), a_run.end());
    const std::span<const float> b_run = testing::must(tried.run(dec.spec, dec.slots));
    const std::vector<float> b(b_run.begin(), b_run.end());
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace kvf
