// lora: the LoRA term models/lora_trace.cpp adds to each adapted projection becomes one Lora
// eqn, keeping every bit on the oracle (an exact pass) over a step whose tokens mix the base
// model and two adapters; the CPU executor's kernel (one adapter's rows at a time) stays
// within float noise of the chain it replaces.
#include <gtest/gtest.h>

#include <memory>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/printer.h"
#include "exec/cpu/executor.h"
#include "models/export_gguf.h"
#include "models/lora.h"
#include "models/lora_trace.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using testing::must;

// A step of 12 tokens (a prefill) and of 1 (a decode: every reshape of the chain is then
// over one row), on the f32 base and on the base written as f16 GGUF (whose stacks are f16,
// widened after their gathers).
struct StepCase {
  int64_t tokens;
  bool f16_base;
};
constexpr StepCase kSteps[] = {{12, false}, {1, false}, {12, true}, {1, true}};

models::Model base_model(bool f16) {
  if (!f16) return testing::open_test_model("llama_lora");
  const std::string path = testing::temp_dir("lora_pass") + "/base-f16.gguf";
  EXPECT_TRUE(models::export_gguf(testing::open_test_model("llama_lora"), path, {.outtype = DType::kF16}).ok());
  return must(models::open_model(path, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false}));
}

struct Traced {
  models::Model m;
  models::LoraSet set;
  ir::Graph graph;
  int64_t tokens;
  explicit Traced(StepCase c) : m(base_model(c.f16_base)), tokens(c.tokens) {
    std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
    for (const char* name : {"a1", "a2"}) {
      adapters.push_back(std::make_shared<models::LoraAdapter>(
          must(models::load_lora(testing::fixture_dir("llama_lora") + "/adapters/" + name, m, name))));
    }
    set = models::LoraSet(std::move(adapters));
    graph = must(m.trace_step({.n_tokens = tokens, .capacity = 0, .cached = false, .lora = &set}));
  }
};

ir::Graph compiled(const ir::Graph& g, bool with_lora) {
  std::vector<compile::Pass> passes;
  for (compile::Pass& p : compile::default_passes()) {
    if (with_lora || p.name != "lora") passes.push_back(std::move(p));
  }
  return must(compile::run_passes(g, passes)).graph;
}

std::vector<int32_t> iota(int64_t n, int32_t from) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<int32_t>(i);
  return v;
}

// Tokens 3.., positions 0.., adapters cycling a1, a2, base.
std::vector<int32_t> adapter_ids(int64_t tokens) {
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i + 1) % 3);
  return ids;
}

TEST(LoraPass, FormsOneEqnPerAdaptedProjectionAndKeepsEveryBitOnTheOracle) {
  for (const StepCase step : kSteps) {
  const int64_t kTokens = step.tokens;
  SCOPED_TRACE(str_cat(kTokens, " tokens, ", step.f16_base ? "f16" : "f32", " base"));
  const Traced t(step);
  for (const ir::Value& v : t.graph.values) {
    if (v.name.starts_with("lora.a.") || v.name.starts_with("lora.b.")) {
      EXPECT_EQ(v.type.dtype, step.f16_base ? DType::kF16 : DType::kF32) << v.name;
    }
  }
  const ir::Graph chain = compiled(t.graph, false), fused = compiled(t.graph, true);
  EXPECT_EQ(testing::count_op(chain, OpKind::kLora), 0);
  EXPECT_EQ(testing::count_op(fused, OpKind::kLora), 14) << "seven projections in each of two layers\n" << ir::print(fused);
  EXPECT_EQ(testing::count_op(fused, OpKind::kGather), 1) << "the embedding's; the stacks are read by the Lora eqns";
  EXPECT_EQ(testing::count_op(fused, OpKind::kMatMul), testing::count_op(chain, OpKind::kMatMul) - 2 * 14);
  const eval::SlotBindings slots{{ir::Slot::kToken, must(eval::Buffer::i32({kTokens}, iota(kTokens, 3)))},
                                 {ir::Slot::kPos, must(eval::Buffer::i32({kTokens}, iota(kTokens, 0)))},
                                 {ir::Slot::kAdapter, must(eval::Buffer::i32({kTokens}, adapter_ids(kTokens)))}};
  const eval::Outputs a = must(testing::run_graph(chain, slots, eval::Precision::kNative));
  const eval::Outputs b = must(testing::run_graph(fused, slots, eval::Precision::kNative));
  EXPECT_EQ(a.at("logits").data, b.at("logits").data);
  }
}

std::vector<float> run_cpu(const ir::Graph& g, int64_t kTokens) {
  ThreadPool pool(2);
  exec::StateStore state;
  auto ex = must(exec::cpu::CpuExecutor::create(must(plan::make_plan(g, plan::cpu_caps(2))), state, pool));
  Status s = ex->run({{ir::Slot::kToken, iota(kTokens, 3)}, {ir::Slot::kPos, iota(kTokens, 0)}, {ir::Slot::kAdapter, adapter_ids(kTokens)}});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  const std::span<const float> out = ex->output("logits");
  return {out.begin(), out.end()};
}

TEST(LoraPass, TheCpuKernelStaysWithinFloatNoiseOfTheChain) {
  for (const StepCase step : kSteps) {
    SCOPED_TRACE(str_cat(step.tokens, " tokens, ", step.f16_base ? "f16" : "f32", " base"));
    const Traced t(step);
    const std::vector<float> chain = run_cpu(compiled(t.graph, false), step.tokens);
    const std::vector<float> fused = run_cpu(compiled(t.graph, true), step.tokens);
    ASSERT_EQ(chain.size(), fused.size());
    EXPECT_LE(testing::rel_error(std::vector<double>(fused.begin(), fused.end()), std::vector<double>(chain.begin(), chain.end())),
              1e-6);
  }
}

}  // namespace
}  // namespace kvf
