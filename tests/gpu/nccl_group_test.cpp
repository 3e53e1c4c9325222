// NcclGroup: NCCL loads at run time; a group of every visible GPU sums device rows so that
// every rank holds the same bits, within f32 rounding of the host's sum, and gathers every
// rank's rows in rank order; a group of more ranks than GPUs is refused by name. On a
// one-GPU machine the group is that GPU alone.
#include "exec/cuda/step/nccl_group.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda/gpu_testing.h"
#include "exec/cuda/step/device.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::cuda::step::NcclGroup;

TEST(NcclGroup, TheLibraryLoads) {
  KVF_NEED_GPU();
  const int v = testing::must(exec::cuda::step::nccl_version());
  EXPECT_GE(v, 20000) << "NCCL version code " << v;
  std::printf("NCCL version code %d\n", v);
}

TEST(NcclGroup, RefusesMoreRanksThanGpus) {
  KVF_NEED_GPU();
  const int gpus = testing::must(exec::cuda::step::Device::count());
  Result<std::unique_ptr<NcclGroup>> g = NcclGroup::open(gpus + 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(g.error().message().find(str_cat(gpus + 1, " ranks need ", gpus + 1, " GPUs; ", gpus, " visible")),
            std::string::npos)
      << g.error().message();
}

// Rank r holds x_r[i] = (r + 1) * sin(i) + i / 7 on GPU r; after the sum every rank holds the
// same bits, each within 1e-6 of the host's f64 sum.
TEST(NcclGroup, EveryVisibleGpuHoldsTheSameSumAfterAnAllReduce) {
  KVF_NEED_GPU();
  const int gpus = testing::must(exec::cuda::step::Device::count());
  std::unique_ptr<NcclGroup> g = testing::must(NcclGroup::open(gpus));
  constexpr size_t kN = 4099;
  std::vector<std::vector<float>> got(static_cast<size_t>(gpus), std::vector<float>(kN));
  std::vector<Status> status(static_cast<size_t>(gpus));
  std::vector<std::thread> ranks;
  for (int r = 0; r < gpus; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float>& x = got[static_cast<size_t>(r)];
      for (size_t i = 0; i < kN; ++i) x[i] = static_cast<float>((r + 1) * std::sin(i) + i / 7.0);
      KVF_CUDA_CHECK(cudaSetDevice(r));
      cudaStream_t stream = nullptr;
      KVF_CUDA_CHECK(cudaStreamCreate(&stream));
      float* d = nullptr;
      KVF_CUDA_CHECK(cudaMalloc(&d, kN * 4));
      KVF_CUDA_CHECK(cudaMemcpy(d, x.data(), kN * 4, cudaMemcpyHostToDevice));
      status[static_cast<size_t>(r)] = g->rank(r).all_reduce_sum_device(d, kN, stream);
      KVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      KVF_CUDA_CHECK(cudaMemcpy(x.data(), d, kN * 4, cudaMemcpyDeviceToHost));
      KVF_CUDA_CHECK(cudaFree(d));
      KVF_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < gpus; ++r) {
    ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
  }
  for (size_t i = 0; i < kN; ++i) {
    double want = 0;
    for (int r = 0; r < gpus; ++r) want += static_cast<float>((r + 1) * std::sin(i) + i / 7.0);
    ASSERT_NEAR(got[0][i], want, 1e-6 * std::max(1.0, std::abs(want))) << "element " << i;
    for (int r = 1; r < gpus; ++r) {
      ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(r)][i], &got[0][i], 4), 0) << "rank " << r << " element " << i;
    }
  }
  std::printf("NCCL all-reduce over %d GPU(s): every rank the same bits\n", gpus);
}

// Rank r's rows x_r[i] = 1000 r + i sit at its own place of [gpus x n] on GPU r; after the
// gather every rank holds every rank's rows, exactly.
TEST(NcclGroup, EveryVisibleGpuHoldsEveryRanksRowsAfterAnAllGather) {
  KVF_NEED_GPU();
  const int gpus = testing::must(exec::cuda::step::Device::count());
  std::unique_ptr<NcclGroup> g = testing::must(NcclGroup::open(gpus));
  constexpr size_t kN = 1031;
  const size_t total = kN * static_cast<size_t>(gpus);
  std::vector<std::vector<float>> got(static_cast<size_t>(gpus), std::vector<float>(total, NAN));
  std::vector<Status> status(static_cast<size_t>(gpus));
  std::vector<std::thread> ranks;
  for (int r = 0; r < gpus; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float>& x = got[static_cast<size_t>(r)];
      for (size_t i = 0; i < kN; ++i) x[r * kN + i] = static_cast<float>(1000 * r + i);
      KVF_CUDA_CHECK(cudaSetDevice(r));
      cudaStream_t stream = nullptr;
      KVF_CUDA_CHECK(cudaStreamCreate(&stream));
      float* d = nullptr;
      KVF_CUDA_CHECK(cudaMalloc(&d, total * 4));
      KVF_CUDA_CHECK(cudaMemcpy(d, x.data(), total * 4, cudaMemcpyHostToDevice));  // NaN but at its own rows
      status[static_cast<size_t>(r)] = g->rank(r).all_gather_device(d, kN, stream);
      KVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      KVF_CUDA_CHECK(cudaMemcpy(x.data(), d, total * 4, cudaMemcpyDeviceToHost));
      KVF_CUDA_CHECK(cudaFree(d));
      KVF_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < gpus; ++r) {
    ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)].error().to_string();
    for (int from = 0; from < gpus; ++from)
      for (size_t i = 0; i < kN; ++i)
        ASSERT_EQ(got[static_cast<size_t>(r)][from * kN + i], static_cast<float>(1000 * from + i))
            << "rank " << r << " holds rank " << from << "'s element " << i;
  }
  std::vector<float> host(4);
  Status on_host = g->rank(0).all_gather(std::span<const float>(host).first(1), host);
  ASSERT_FALSE(on_host.ok());  // a group of GPUs gathers device memory only
  EXPECT_EQ(on_host.error().code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace kvf
