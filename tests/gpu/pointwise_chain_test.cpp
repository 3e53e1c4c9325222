// Runs of small elementwise ops (a step's position and length arithmetic: casts, products
// with the rope's frequencies, cos and sin, the length's add, min and max, the guard's
// compares and and) run as one launch on the GPU (pointwise_chain): each op sees what the
// ones before it wrote, the values are the oracle's, and a fault inside names its eqn.
#include <gtest/gtest.h>

#include <random>

#include "cuda/gpu_testing.h"
#include "eval/oracle.h"
#include "exec/cuda/step/executor.h"
#include "ir/ops.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::V;

int chained_ops(const exec::cuda::step::CudaExecutor& gpu) {
  int n = 0;
  for (const std::string& l : gpu.launch_labels()) {
    if (l.rfind("pointwise chain of ", 0) == 0) n += std::stoi(l.substr(19));
  }
  return n;
}

TEST(GpuPointwiseChain, AStepsPositionArithmeticIsOneLaunchWithTheOraclesValues) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(testing::test_seed());
  ir::Builder b("chain");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {3});
  V tok = b.slot(ir::Slot::kToken, DType::kI32, {3});
  V freq = testing::input(b, "freq", testing::random_buffer(rng, {1, 5}, 0.0, 1.0));
  V angle = b.reshape(b.cast(pos, DType::kF32), {3, 1}) * freq;  // [3, 5], broadcast both ways
  V len = pos + b.like(pos, 1);
  V ok = b.binary(ir::OpKind::kAnd, b.compare(len, b.like(len, 1), ir::CmpDir::kGe),
                  b.compare(len, b.like(len, 64), ir::CmpDir::kLe));
  V live = b.binary(ir::OpKind::kMax, b.binary(ir::OpKind::kMin, len, b.like(len, 64)), b.like(len, 1));
  V mixed = b.unary(ir::OpKind::kAbs, b.unary(ir::OpKind::kNeg, pos) * tok - tok);
  b.output("cos", b.unary(ir::OpKind::kCos, angle));
  b.output("sin", b.unary(ir::OpKind::kSin, angle));
  b.output("ok", b.cast(ok, DType::kF32));
  b.output("live", b.cast(live, DType::kF32));
  b.output("mixed", b.cast(mixed, DType::kF32));
  const ir::Graph g = testing::must(b.finish());

  auto device = testing::must(exec::cuda::step::Device::open());
  exec::StateStore state(*device);
  auto gpu = testing::must(exec::cuda::step::CudaExecutor::create(testing::must(plan::make_plan(g, device->caps())), state, *device));
  EXPECT_GE(chained_ops(*gpu), 14);
  for (const std::vector<int32_t>& p : {std::vector<int32_t>{0, 5, 63}, std::vector<int32_t>{-3, 64, 900}}) {
    const std::vector<int32_t> t{7, -2, 11};
    ASSERT_TRUE(gpu->run({{ir::Slot::kPos, p}, {ir::Slot::kToken, t}}).ok());
    eval::SlotBindings slots;
    slots.emplace(ir::Slot::kPos, testing::must(eval::Buffer::i32({3}, p)));
    slots.emplace(ir::Slot::kToken, testing::must(eval::Buffer::i32({3}, t)));
    eval::StateStore none;
    const eval::Outputs want = testing::must(eval::Oracle().run(g, slots, none));
    for (const auto& [name, buf] : want) {
      const std::span<const float> got = gpu->output(name);
      ASSERT_EQ(got.size(), buf.data.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], buf.data[i], 2e-6 * (1 + std::abs(buf.data[i]))) << name << "[" << i << "] at pos " << p[0];
      }
    }
  }
}

// An integer division by zero inside a chain is the step's typed fault, naming the eqn.
TEST(GpuPointwiseChain, AFaultInsideAChainNamesItsEqn) {
  KVF_NEED_GPU();
  ir::Builder b("chain_fault");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {2});
  V zero = pos - pos;
  b.output("q", b.cast(b.binary(ir::OpKind::kDiv, pos + b.like(pos, 1), zero), DType::kF32));
  auto device = testing::must(exec::cuda::step::Device::open());
  exec::StateStore state(*device);
  auto gpu = testing::must(
      exec::cuda::step::CudaExecutor::create(testing::must(plan::make_plan(testing::must(b.finish()), device->caps())), state, *device));
  ASSERT_GE(chained_ops(*gpu), 3);
  const Status s = gpu->run({{ir::Slot::kPos, {4, 5}}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().to_string().find("eqn"), std::string::npos) << s.error().to_string();
}

}  // namespace
}  // namespace kvf
