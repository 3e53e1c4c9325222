// The tensor-core linears (exec/cuda/step/tensor_cores.cu) against a double reference that
// sees the inputs the path promises: x rounded to the weights' 16-bit type (bf16 for bf16,
// f16 otherwise) and q8_0/q4_0 weights widened to f16. What is left is the f32
// accumulation's error. The dispatcher must take this path from kTensorCoreRows rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/gpu_testing.h"
#include "exec/cuda/step/cublaslt_api.h"
#include "exec/cuda/step/device.h"
#include "exec/cuda/step/kernels.h"
#include "exec/cuda/step/runtime_library.h"
#include "gpu/linear_testing.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using testing::Dev;
using testing::Weights;
using testing::random_weights;

double rounded_x(DType w_dt, float x) {
  return w_dt == DType::kBF16 ? testing::bf16_to_f32(testing::f32_to_bf16(x)) : testing::f16_to_f32(testing::f32_to_f16(x));
}

class TensorCoreLinear : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool>> {};

TEST_P(TensorCoreLinear, MatchesTheRoundedInputsReference) {
  KVF_NEED_GPU();
  const auto [dt, m, with_bias] = GetParam();
  const int64_t k = 320, n = 200;
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::unique_ptr<Device> device = testing::must(Device::open());
  ASSERT_NE(device->tensor_cores().handle, nullptr) << "cuBLASLt did not start";
  const Weights w = random_weights(dt, n, k, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k)), bias(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (float& v : bias) v = normal(rng);

  Dev xd(*device, x.data(), m * k * 4), wd(*device, w.bytes.data(), static_cast<int64_t>(w.bytes.size()));
  Dev bd(*device, bias.data(), n * 4), out(*device, nullptr, m * n * 4), out2(*device, nullptr, m * n * 4);
  const int64_t scratch_bytes = exec::cuda::step::tensor_core_scratch_bytes(m, k, n, dt);
  ASSERT_GT(scratch_bytes, 0);
  Dev scratch(*device, nullptr, scratch_bytes);
  exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
  l.tc.scratch = scratch.p;
  l.tc.scratch_bytes = scratch_bytes;
  const float* b = with_bias ? static_cast<const float*>(bd.p) : nullptr;
  ASSERT_TRUE(exec::cuda::step::linear_tensor_cores(static_cast<const float*>(xd.p), m, k, dt, wd.p, n, b,
                                                    static_cast<float*>(out.p), l));
  exec::cuda::step::linear(static_cast<const float*>(xd.p), m, k, dt, wd.p, n, b, static_cast<float*>(out2.p), l);
  ASSERT_TRUE(device->synchronize("tensor-core linear").ok());
  std::vector<float> got(static_cast<size_t>(m * n)), via_dispatch(got.size());
  ASSERT_TRUE(device->copy_to_host(got.data(), out.p, m * n * 4).ok());
  ASSERT_TRUE(device->copy_to_host(via_dispatch.data(), out2.p, m * n * 4).ok());
  EXPECT_EQ(got, via_dispatch) << "linear() did not take the tensor cores at " << m << " rows";

  std::vector<double> ref(got.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = with_bias ? bias[static_cast<size_t>(j)] : 0.0;
      for (int64_t c = 0; c < k; ++c) {
        acc += rounded_x(dt, x[static_cast<size_t>(i * k + c)]) * w.widened[static_cast<size_t>(j * k + c)];
      }
      ref[static_cast<size_t>(i * n + j)] = acc;
    }
  }
  const double rel = testing::rel_error(std::vector<double>(got.begin(), got.end()), ref);
  EXPECT_LE(rel, 1e-5) << dtype_name(dt) << " m " << m;
}

INSTANTIATE_TEST_SUITE_P(Types, TensorCoreLinear,
                         ::testing::Combine(::testing::Values(DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0),
                                            ::testing::Values(int64_t{9}, int64_t{32}, int64_t{300}), ::testing::Bool()),
                         [](const auto& info) {
                           return str_cat(dtype_name(std::get<0>(info.param)), "_m", std::get<1>(info.param),
                                          std::get<2>(info.param) ? "_bias" : "");
                         });

// Below kTensorCoreRows, or with f32 weights, the product stays on the f32 SIMT kernels.
TEST(TensorCoreLinearScope, FewRowsAndF32WeightsStayOnTheSimtKernels) {
  using exec::cuda::step::tensor_core_fits;
  EXPECT_FALSE(tensor_core_fits(plan::kTensorCoreRows - 1, 256, DType::kF16));
  EXPECT_TRUE(tensor_core_fits(plan::kTensorCoreRows, 256, DType::kF16));
  EXPECT_FALSE(tensor_core_fits(4096, 256, DType::kF32));
  EXPECT_FALSE(tensor_core_fits(4096, 260, DType::kF16));  // k not a multiple of 8
}

// cuBLASLt is opened at run time (no GPU needed for that): the toolkit's library of the
// headers' major version, with every entry point the tensor-core linears call.
TEST(CublasLtLibrary, OpensWithEveryEntryPoint) {
  const exec::cuda::step::CublasLt* lt = exec::cuda::step::cublaslt();
  ASSERT_NE(lt, nullptr);
  EXPECT_NE(lt->create, nullptr);
  EXPECT_NE(lt->matmul, nullptr);
  EXPECT_EQ(lt, exec::cuda::step::cublaslt()) << "opened once";
}

// A library that is not there is an error in words, never a crash; so is a missing name.
TEST(RuntimeLibrary, NamesWhatIsMissing) {
  exec::cuda::step::RuntimeLibrary none("libkvforge-no-such-library.so.1");
  void (*fn)() = nullptr;
  none.resolve(fn, "anything");
  EXPECT_EQ(fn, nullptr);
  EXPECT_NE(none.error().find("libkvforge-no-such-library.so.1"), std::string::npos) << none.error();
  exec::cuda::step::RuntimeLibrary libc("libc.so.6");
  int (*abs_fn)(int) = nullptr;
  libc.resolve(abs_fn, "abs");
  ASSERT_NE(abs_fn, nullptr) << libc.error();
  EXPECT_EQ(abs_fn(-3), 3);
  EXPECT_TRUE(libc.error().empty());
  libc.resolve(fn, "kvforge_no_such_symbol");
  EXPECT_EQ(fn, nullptr);
  EXPECT_NE(libc.error().find("has no kvforge_no_such_symbol"), std::string::npos) << libc.error();
}

}  // namespace
}  // namespace kvf
