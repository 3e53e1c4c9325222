// The shared attention case table (attention_cases.h) on the CUDA executor: each case's graph,
// compiled to one Attention eqn, runs on the GPU and agrees with the oracle's run of the
// traced chain (eval/) and the plain-loop reference, zeros for a row that sees no key, as the
// CPU kernel, context parallel and AHBM do in their own tests.
#include <gtest/gtest.h>

#include "attention_cases.h"
#include "cuda/gpu_testing.h"
#include "exec/cuda/step/executor.h"

namespace kvf {
namespace {

using namespace testing::attention_cases;

class AttentionCasesGpu : public CaseTest {};

TEST_P(AttentionCasesGpu, TheStepAgreesWithTheOracle) {
  KVF_NEED_GPU();
  SCOPED_TRACE(str_cat("seed ", seed));
  const Built built = FormBuilder(GetParam(), rng).build();
  auto device = testing::must(exec::cuda::step::Device::open());
  exec::StateStore state(*device);
  const plan::Plan p = testing::must(plan::make_plan(compiled(built), device->caps()));
  auto ex = testing::must(exec::cuda::step::CudaExecutor::create(p, state, *device));
  for (const auto& [name, host] : built.state) {  // the caches start as the case's
    exec::StateBuffer* buf = state.find(name);
    ASSERT_TRUE(buf && buf->type.dtype == host.dtype) << name;
    const std::vector<uint8_t> bytes = state_bytes(host);
    KVF_CUDA_CHECK(cudaMemcpy(buf->buf.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  const Status s = ex->run(slot_values(built.slots));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const std::span<const float> out = ex->output("out");
  expect_agrees(built, std::vector<float>(out.begin(), out.end()), "cuda step");
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionCasesGpu, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace kvf
