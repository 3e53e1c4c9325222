// A whole model split over 2 and 4 tensor-parallel ranks (llm::ParallelGroup: each rank a thread
// with its own weights, runner and KV cache) against the same model on one rank: a prompt's
// prefill, then 16 greedy decode steps. The greedy ids must be equal, and the logits of every
// step close: on the oracle in f64 to 1e-9 of the step's largest logit (only the order of the
// sums differs: ~1e-16 a sum), on the CPU executor in f32 to the tolerance below. And the
// traced rank graph holds the all-reduces where they belong, a Generator opened over 2
// ranks (what `kvforge generate --tp 2` steps through) gives one rank's greedy ids, and a
// paged Driver over 2 ranks (`batch --tp 2`, `serve --tp 2`) gives every request the tokens
// it has alone, through chunked prefill and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

#include "core/collective.h"
#include "eval/oracle.h"
#include "exec/context_parallel.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/scheduler.h"
#include "llm/parallel_group.h"
#include "models/tensor_parallel.h"
#include "solo_run.h"
#include "testing.h"

namespace kvf {
namespace {

using StepFn = std::function<Result<std::span<const float>>(const models::StepSpec&, const exec::SlotValues&)>;

struct Greedy {
  std::vector<int32_t> ids;                 // the prompt's next token, then each decode step's
  std::vector<std::vector<float>> logits;   // the logits each id was picked from
};

constexpr int64_t kCapacity = 64;
constexpr int kDecodeSteps = 16;

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The prompt's prefill (last logits), then kDecodeSteps one-token steps feeding back the argmax.
Greedy greedy(const StepFn& step, const std::vector<int32_t>& prompt) {
  Greedy g;
  std::vector<int32_t> tokens = prompt, pos(prompt.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  models::StepSpec spec{.n_tokens = static_cast<int64_t>(prompt.size()), .capacity = kCapacity, .last_logits = true};
  for (int s = 0; s <= kDecodeSteps; ++s) {
    Result<std::span<const float>> logits = step(spec, {{ir::Slot::kToken, tokens}, {ir::Slot::kPos, pos}});
    if (!logits) {
      ADD_FAILURE() << "step " << s << ": " << logits.error().to_string();
      return g;
    }
    g.logits.emplace_back(logits->begin(), logits->end());
    g.ids.push_back(argmax(*logits));
    const int32_t next = pos.back() + 1;
    tokens = {g.ids.back()};
    pos = {next};
    spec.n_tokens = 1;
  }
  return g;
}

std::vector<int32_t> prompt_for(int64_t vocab) {
  std::mt19937_64 rng(testing::test_seed());
  std::uniform_int_distribution<int32_t> id(1, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(8);
  for (int32_t& t : p) t = id(rng);
  return p;
}

// `model` on one runner and over each rank count in `sizes`: equal greedy ids, every step's
// logits within tol.
void expect_split_matches_whole(const models::Model& model, const llm::RunnerOptions& opts, std::vector<int> sizes,
                                double tol) {
  const std::vector<int32_t> prompt = prompt_for(model.config.vocab);
  llm::StepRunner whole(model, opts);
  const Greedy want = greedy([&](const auto& spec, const auto& slots) { return whole.run(spec, slots); }, prompt);
  ASSERT_EQ(want.ids.size(), static_cast<size_t>(kDecodeSteps + 1));
  for (int size : sizes) {
    SCOPED_TRACE(str_cat(size, " ranks"));
    std::unique_ptr<llm::ParallelGroup> group = testing::must(llm::ParallelGroup::tensor_parallel(model, size, opts));
    const Greedy got = greedy([&](const auto& spec, const auto& slots) { return group->run(spec, slots); }, prompt);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    EXPECT_EQ(got.ids, want.ids);
    double worst = 0;
    for (size_t s = 0; s < want.logits.size(); ++s) {
      worst = std::max(worst, testing::max_error_of_largest(got.logits[s], want.logits[s]));
    }
    for (int r = 1; r < size; ++r) {  // the last step's logits: every rank holds the same bits
      const std::span<const float> rank_r = group->logits(r);
      EXPECT_TRUE(std::equal(rank_r.begin(), rank_r.end(), got.logits.back().begin(), got.logits.back().end())) << r;
    }
    EXPECT_LE(worst, tol);
    ::testing::Test::RecordProperty(str_cat("worst_step_error_tp", size), str_cat(worst));
    std::printf("%s, %d ranks: worst step error %.3g\n", model.source.c_str(), size, worst);
  }
}

llm::RunnerOptions oracle_f64() {
  llm::RunnerOptions o;
  o.executor = llm::ExecutorKind::kOracle;
  o.precision = eval::Precision::kF64;
  o.threads = 1;
  return o;
}

llm::RunnerOptions cpu() {
  llm::RunnerOptions o;
  o.threads = 2;
  return o;
}

// f32 on the CPU: the split changes the order of the o and down sums (a rank's partial dot
// products, then the ranks'), each a few f32 roundings of ~6e-8 relative; through 5 layers
// measured at 3e-7 to 7e-7 of the step's largest logit (2 and 4 ranks, both models). 2e-5
// keeps a margin of ~30 and stays far below what moves a greedy pick here.
constexpr double kCpuTol = 2e-5;
// The oracle in f64: only the order of f64 sums differs (~1e-16 each). StepRunner hands the
// logits back as f32, so the greedy runs compare those (equal bits in practice); the f64
// values themselves are compared in PrefillLogitsInF64.
constexpr double kOracleTol = 1e-9;

TEST(TensorParallel, SyntheticLlamaOnTheOracleInF64) {
  expect_split_matches_whole(testing::open_test_model("synthetic:llama-260k"), oracle_f64(), {2, 4}, kOracleTol);
}

TEST(TensorParallel, SyntheticLlamaOnTheCpuExecutor) {
  expect_split_matches_whole(testing::open_test_model("synthetic:llama-260k"), cpu(), {2, 4}, kCpuTol);
}

// stories260K: 8 query heads over 4 KV heads, feed-forward 172 (4 ranks: 43 units each).
TEST(TensorParallel, Stories260kOnBothRunners) {
  std::optional<std::string> path = testing::model_file("stories260K/stories260K.bin");
  if (!path) KVF_SKIP_MISSING("stories260K/stories260K.bin");
  const models::Model m = testing::must(models::open_model(*path, {.with_tokenizer = false}));
  expect_split_matches_whole(m, oracle_f64(), {2, 4}, kOracleTol);
  expect_split_matches_whole(m, cpu(), {2, 4}, kCpuTol);
}

// Rank r's traced graph on its own oracle and thread, in f64, with the group's handle.
std::vector<eval::Outputs> run_ranks_f64(const std::vector<ir::Graph>& graphs, const eval::SlotBindings& slots) {
  ThreadGroup group(static_cast<int>(graphs.size()));
  std::vector<eval::Outputs> out(graphs.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < graphs.size(); ++r) {
    threads.emplace_back([&, r] {
      Collective& me = group.rank(static_cast<int>(r));
      eval::Oracle oracle({.precision = eval::Precision::kF64, .group = &me});
      eval::StateStore state;
      Result<eval::Outputs> o = oracle.run(graphs[r], slots, state);
      if (!o) {
        me.abort();
        ADD_FAILURE() << "rank " << r << ": " << o.error().to_string();
        return;
      }
      out[r] = std::move(*o);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// A full forward over a prompt, every position's logits in f64, whole and split: the split
// only reorders f64 sums, so 1e-9 of the largest logit is 10^6 times the rounding it moves.
TEST(TensorParallel, PrefillLogitsInF64) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const std::vector<int32_t> prompt = prompt_for(m.config.vocab);
  const auto n = static_cast<int64_t>(prompt.size());
  std::vector<int32_t> pos(prompt.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
  eval::SlotBindings slots;
  slots.emplace(ir::Slot::kToken, testing::must(eval::Buffer::i32({n}, prompt)));
  slots.emplace(ir::Slot::kPos, testing::must(eval::Buffer::i32({n}, pos)));
  const models::StepSpec spec{.n_tokens = n, .cached = false};
  const eval::Outputs whole = testing::must(testing::run_graph(testing::must(m.trace_step(spec)), slots));
  const std::vector<double>& want = whole.at("logits").data;
  for (int size : {2, 4}) {
    std::vector<ir::Graph> graphs;
    for (int r = 0; r < size; ++r) {
      const models::ModelConfig c = testing::must(models::tp_config(m.config, {r, size}));
      graphs.push_back(testing::must(m.trace(c, testing::must(models::tp_weights(m.config, m.weights, {r, size})), spec)));
    }
    const std::vector<eval::Outputs> ranks = run_ranks_f64(graphs, slots);
    double diff = 0, scale = 0;
    for (int r = 0; r < size; ++r) {
      const std::vector<double>& got = ranks[static_cast<size_t>(r)].at("logits").data;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
    }
    EXPECT_LE(diff / scale, kOracleTol) << size << " ranks";
    std::printf("f64 prefill, %d ranks: worst error %.3g of the largest logit\n", size, diff / scale);
  }
}

// A rank's graph: the embedding, each layer's o and down products, and the logits summed over
// the group, in that order; the whole model's has none.
TEST(TensorParallel, TheRankGraphSumsWhereTheSplitNeedsIt) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const models::StepSpec spec{.n_tokens = 3, .capacity = 8};
  EXPECT_EQ(testing::count_op(testing::must(m.trace_step(spec)), ir::OpKind::kAllReduce), 0);
  const models::ModelConfig c = testing::must(models::tp_config(m.config, {1, 2}));
  const models::Weights w = testing::must(models::tp_weights(m.config, m.weights, {1, 2}));
  const ir::Graph g = testing::must(m.trace(c, w, spec));
  std::vector<std::string> summed;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op != ir::OpKind::kAllReduce) continue;
    const ir::Eqn& reader = *std::find_if(g.eqns.begin(), g.eqns.end(), [&](const ir::Eqn& r) {
      return std::find(r.in.begin(), r.in.end(), e.out) != r.in.end();
    });
    summed.push_back(str_cat(ir::op_name(reader.op), ":", g.value(reader.out).name));
  }
  std::vector<std::string> want = {"reshape:"};
  for (int64_t l = 0; l < m.config.n_layers; ++l) {
    want.push_back(str_cat("add:attn_out.", l));
    want.push_back(str_cat("add:ffn_out.", l));
  }
  want.push_back("reshape:");  // the logits output
  EXPECT_EQ(summed, want);
}

TEST(TensorParallel, AFailedStepIsEveryRanksAndTheNextOneRuns) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::unique_ptr<llm::ParallelGroup> group = testing::must(llm::ParallelGroup::tensor_parallel(m, 2, cpu()));
  const models::StepSpec spec{.n_tokens = 1, .capacity = 8};
  Result<std::span<const float>> bad = group->run(spec, {{ir::Slot::kToken, {100000}}, {ir::Slot::kPos, {0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kValidation);
  EXPECT_NE(bad.error().message().find("token ids in [0, 512)"), std::string::npos) << bad.error().message();
  Result<std::span<const float>> good = group->run(spec, {{ir::Slot::kToken, {5}}, {ir::Slot::kPos, {0}}});
  EXPECT_TRUE(good.ok()) << good.error().to_string();
}

// Generator::open over 2 ranks against the plain Generator: the greedy ids of a prefill and
// decode steps taken from the logits (step) and drawn from them (step_draw), the same bytes of
// KV state over the ranks, and a reset that starts the sequence again.
TEST(TensorParallel, AGeneratorOverTwoRanksGivesOneRanksIds) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const llm::GeneratorOptions opts{.threads = 2, .last_logits = true};
  llm::Generator whole(m, kCapacity, opts);
  std::unique_ptr<llm::Generator> split = testing::must(llm::Generator::open(m, kCapacity, opts, 2));
  EXPECT_FALSE(split->samples_on_device());
  exec::StepDraws greedy_draw;
  greedy_draw.rows.push_back({});
  auto ids = [&](llm::Generator& gen) {
    std::vector<int32_t> out;
    std::vector<int32_t> in = {1, 7, 42, 99};
    for (int s = 0; s < 8; ++s) {
      const bool drawn = s % 2 == 1;
      Result<int32_t> next = drawn ? gen.step_draw(in, greedy_draw) : [&]() -> Result<int32_t> {
        Result<std::vector<float>> logits = gen.step(in);
        if (!logits) return logits.take_error();
        return argmax(*logits);
      }();
      if (!next) {
        ADD_FAILURE() << "step " << s << ": " << next.error().to_string();
        return out;
      }
      out.push_back(*next);
      in = {*next};
    }
    return out;
  };
  const std::vector<int32_t> want = ids(whole);
  EXPECT_EQ(ids(*split), want);
  EXPECT_EQ(split->state_bytes(), whole.state_bytes());
  split->reset();
  EXPECT_EQ(split->position(), 0);
  EXPECT_EQ(ids(*split), want);
}

TEST(TensorParallel, AGeneratorRefusesWhatDoesNotSplit) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");  // 8 query heads
  Result<std::unique_ptr<llm::Generator>> three = llm::Generator::open(m, kCapacity, {}, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(three.error().message().find("n_heads 8 is not a multiple of 3 ranks"), std::string::npos)
      << three.error().message();
  const models::Model moe = testing::open_test_model("synthetic:qwen3moe-tiny");
  Result<std::unique_ptr<llm::Generator>> experts = llm::Generator::open(moe, kCapacity, {}, 2);
  ASSERT_FALSE(experts.ok());
  EXPECT_EQ(experts.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(experts.error().message().find("the qwen3moe tracer does not split"), std::string::npos)
      << experts.error().message();
}

// A group of context-parallel runners is the CUDA executor's (tests/gpu/cp_gpu_test.cpp);
// elsewhere, and beside tensor-parallel ranks or an attention backend, it is refused by name.
TEST(ContextParallelGroup, RefusesWhatItDoesNotRun) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  Result<std::unique_ptr<llm::Generator>> cpu = llm::Generator::open(m, kCapacity, {}, 1, 2);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(cpu.error().message().find("needs the CUDA executor"), std::string::npos) << cpu.error().message();
  Result<std::unique_ptr<llm::Generator>> both = llm::Generator::open(m, kCapacity, {}, 2, 2);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message().find("2 tensor-parallel and 2 context-parallel ranks at once"), std::string::npos)
      << both.error().message();
  llm::RunnerOptions gpu;
  gpu.executor = llm::ExecutorKind::kCuda;
  std::unique_ptr<exec::ContextParallelAttention> backend = testing::must(exec::ContextParallelAttention::create(2, 16));
  gpu.decode_attention = backend.get();
  Result<std::unique_ptr<llm::ParallelGroup>> placed = llm::ParallelGroup::context_parallel(m, 2, gpu);
  ASSERT_FALSE(placed.ok());
  EXPECT_NE(placed.error().message().find("an attention backend serves one runner"), std::string::npos)
      << placed.error().message();
  Result<std::unique_ptr<llm::ParallelGroup>> none = llm::ParallelGroup::context_parallel(m, 0, gpu);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kInvalidInput);
  // A driver's: refused when it opens, and every step after.
  llm::DriverOptions d = testing::test_driver(16, 64, "cp_refused");
  d.cp_ranks = 2;
  llm::Driver on_cpu(m, d);
  Status opened = on_cpu.opened();
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().message().find("needs the CUDA executor"), std::string::npos) << opened.error().message();
  d.tp_ranks = 2;
  llm::Driver both_kinds(m, d);
  opened = both_kinds.opened();
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().message().find("2 tensor-parallel and 2 context-parallel ranks at once"), std::string::npos)
      << opened.error().message();
}

// Six requests (greedy and sampled) on one paged pool, scheduled in 16-token steps of up to 4
// rows: alone on one rank, then over 2 ranks with room for all, then over 2 ranks in a pool
// so small that sequences are preempted and recomputed. Every request's tokens are its solo
// run's; the split's f32 sums differ from the whole model's in the last bits only.
TEST(TensorParallel, ADriverOverTwoRanksGivesEachRequestItsSoloTokensThroughPreemption) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<llm::Request> reqs = testing::mixed_requests(rng, m.config.vocab);
  struct Run {
    std::map<std::string, std::vector<int32_t>> ids;
    int64_t preemptions = 0;
    int64_t state_bytes = 0;
  };
  auto run = [&](int ranks, int32_t blocks) {
    llm::DriverOptions d = testing::test_driver(blocks, 64, "tp_driver");
    d.tp_ranks = ranks;
    llm::Driver driver(m, d);
    Status opened = driver.opened();
    EXPECT_TRUE(opened.ok()) << opened.error().to_string();
    llm::Scheduler sched(driver, {.max_batch_tokens = 16, .max_rows = 4});
    Run out;
    for (const auto& [id, c] : testing::run_scheduled(sched, reqs)) out.ids[id] = c.ids;
    out.preemptions = sched.preemptions();
    out.state_bytes = driver.state_bytes();
    return out;
  };
  const Run one = run(1, 64), two = run(2, 64), tight = run(2, 9);
  for (const llm::Request& r : reqs) {
    const std::vector<int32_t> alone = testing::solo(m, r, 64);
    EXPECT_EQ(one.ids.at(r.id), alone) << r.id << " on one rank";
    EXPECT_EQ(two.ids.at(r.id), alone) << r.id << " over 2 ranks";
    EXPECT_EQ(tight.ids.at(r.id), alone) << r.id << " over 2 ranks, preempted";
  }
  EXPECT_EQ(two.preemptions, 0);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_EQ(two.state_bytes, one.state_bytes);  // each rank pools its own half of the KV heads
}

// Ranks that cannot open (8 heads over 3) leave a driver that refuses every step and warm-up
// with the group's reason, and opens no sequence into a step that would run.
TEST(TensorParallel, ADriverWhoseRanksCannotOpenRefusesEveryStep) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  llm::DriverOptions d = testing::test_driver(16, 64, "tp_refused");
  d.tp_ranks = 3;
  llm::Driver driver(m, d);
  Status opened = driver.opened();
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(opened.error().message().find("n_heads 8 is not a multiple of 3 ranks"), std::string::npos)
      << opened.error().message();
  Status warm = driver.warm_up(2, 16);
  ASSERT_FALSE(warm.ok());
  EXPECT_EQ(warm.error().code(), ErrorCode::kUnsupported);
  const llm::Opened seq = testing::must(driver.open({1, 2, 3}, 4, {}));
  ASSERT_TRUE(seq.seq.has_value());
  ASSERT_FALSE(testing::must(driver.reserve(*seq.seq, 3)).has_value());
  Result<std::vector<llm::RowResult>> step = driver.step({{*seq.seq, 3}});
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kvf
