// Eqn by eqn: one compiled step of each family (f32 and f16 caches of 64 positions, so that
// the attention splits its keys) with every f32 intermediate made an output
// (so nothing shares arena bytes), run on the CPU and the CUDA executor from the same plan.
// The first eqn whose value differs names the kernel at fault, where a logits test could
// only say that something did.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "core/thread_pool.h"
#include "cuda/gpu_testing.h"
#include "exec/cpu/executor.h"
#include "exec/cuda/step/executor.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

plan::Plan plan_with_every_value(const models::Model& m, const models::StepSpec& spec, const plan::DeviceCaps& caps) {
  const ir::Graph traced = testing::must(m.trace_step(spec));
  ir::Graph g = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    const ir::ValueId v = g.eqns[e].out;
    if (g.type(v).dtype == DType::kF32 && g.find_output(str_cat("eqn", e)) < 0) g.outputs.push_back({str_cat("eqn", e), v});
  }
  return testing::must(plan::make_plan(std::move(g), caps));
}

class EqnDiff : public ::testing::TestWithParam<std::tuple<const char*, DType>> {};

TEST_P(EqnDiff, EveryIntermediateAgreesWithTheCpu) {
  KVF_NEED_GPU();
  const auto [name, kv] = GetParam();
  const models::Model m = testing::open_test_model(name);
  auto device = testing::must(exec::cuda::step::Device::open());
  const models::StepSpec spec{.n_tokens = 5, .capacity = 64, .kv_dtype = kv};
  ThreadPool pool(2);
  exec::StateStore cpu_state;
  exec::StateStore gpu_state(*device);
  auto cpu = testing::must(exec::cpu::CpuExecutor::create(plan_with_every_value(m, spec, plan::cpu_caps(2)), cpu_state, pool));
  auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(plan_with_every_value(m, spec, device->caps()), gpu_state, *device));
  const exec::SlotValues slots{{ir::Slot::kToken, {1, 7, 3, 9, 4}}, {ir::Slot::kPos, {0, 1, 2, 3, 4}}};
  ASSERT_TRUE(cpu->run(slots).ok());
  const Status s = gpu->run(slots);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  // An f16 cache write can round a value one f16 ulp (2^-11) apart on the two devices when
  // their f32 inputs differ in the last bit; everything downstream carries that.
  const double tolerance = kv == DType::kF16 ? 1e-4 : 1e-5;
  const ir::Graph& g = cpu->plan().graph;
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    const std::span<const float> a = cpu->output(str_cat("eqn", e)), b = gpu->output(str_cat("eqn", e));
    if (a.empty()) continue;
    ASSERT_EQ(a.size(), b.size());
    const double rel = testing::rel_error(std::vector<double>(b.begin(), b.end()), std::vector<double>(a.begin(), a.end()));
    ASSERT_TRUE(rel <= tolerance || (std::isnan(rel) && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
                  return (std::isnan(x) && std::isnan(y)) || x == y;
                })))
        << "eqn " << e << ": " << ir::eqn_str(g, g.eqns[e]) << " rel " << rel << " (cpu " << a[0] << ", gpu " << b[0] << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, EqnDiff,
                         ::testing::Combine(::testing::Values("synthetic:llama-260k", "gpt2", "bloom", "gemma2", "deepseek_v2", "qwen2_moe",
                                                              "deepseek_v3", "deepseek_v32"),
                                            ::testing::Values(DType::kF32, DType::kF16)),
                         [](const auto& info) {
                           return str_cat(testing::as_test_name(std::get<0>(info.param)), "_",
                                          dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace kvf
