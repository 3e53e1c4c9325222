// GPU test helpers: the skip/require rule, checked CUDA calls, bf16/f16 rounding on the host.
// Without a GPU a test skips; with KVF_REQUIRE_GPU=1 (the device run) it fails instead, as
// KVF_REQUIRE_MODELS does for model files (tests/testing.h).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_seed.h"

namespace kvf::testing {

// KVF_REQUIRE_GPU=1 (the GPU machine's run) or KVF_REQUIRE_MODELS=1 (CI, which leaves the
// gpu label out of its run): a missing GPU fails the test instead of skipping it.
inline bool gpu_required() {
  for (const char* flag : {"KVF_REQUIRE_GPU", "KVF_REQUIRE_MODELS"}) {
    const char* r = std::getenv(flag);
    if (r != nullptr && std::string(r) == "1") return true;
  }
  return false;
}

// Empty when a GPU is usable; otherwise why not.
inline std::string gpu_missing() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return "";
}

// Use at the top of a test body.
#define KVF_NEED_GPU()                                                            \
  do {                                                                            \
    const std::string why_ = ::kvf::testing::gpu_missing();                       \
    if (!why_.empty()) {                                                          \
      if (::kvf::testing::gpu_required()) FAIL() << "a GPU is required: " << why_;   \
      GTEST_SKIP() << why_;                                                       \
    }                                                                             \
  } while (0)

// Every CUDA call in a test goes through this.
#define KVF_CUDA_CHECK(call)                                                                 \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);                   \
  } while (0)

// Round-to-nearest-even f32 -> bf16 / f16 bits, and back.
inline constexpr uint16_t kNaN16 = 0x7fff;  // a NaN in both bf16 and f16: poison for 16-bit buffers

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f32_to_f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline float f16_to_f32(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}


// A device allocation freed at scope exit.
template <class T>
struct DevBuf {
  T* p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() {
    if (p) (void)cudaFree(p);
  }
};

// A device copy of `host`, min_elems elements allocated at the least (a kernel may take the
// address of an empty tensor): KVF_CUDA_CHECK(upload(d, host)).
template <class T>
cudaError_t upload(DevBuf<T>& d, const std::vector<T>& host, size_t min_elems = 0) {
  if (const cudaError_t e = cudaMalloc(&d.p, std::max(host.size(), min_elems) * sizeof(T)); e != cudaSuccess) return e;
  return cudaMemcpy(d.p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
}

// A stream of the test's own (blocking: ordered with the legacy default stream's work).
struct DevStream {
  cudaStream_t s = nullptr;
  DevStream() = default;
  DevStream(const DevStream&) = delete;
  DevStream& operator=(const DevStream&) = delete;
  ~DevStream() {
    if (s) (void)cudaStreamDestroy(s);
  }
};

// The worst ‖Δ‖/‖ref‖ over one test's cases, printed when the test ends: the reference sees
// the same 16-bit inputs, so this is the kernel's fp32 accumulation error alone.
struct WorstError {
  double worst = 0;
  int cases = 0;
  void add(double rel) {
    worst = std::max(worst, rel);
    ++cases;
  }
  void print_and_reset() {
    if (cases > 0) std::printf("[ worst ] %d cases, max rel L2 %.3g\n", cases, worst);
    *this = {};
  }
};
inline WorstError& worst_error() {
  static WorstError w;
  return w;
}

}  // namespace kvf::testing
