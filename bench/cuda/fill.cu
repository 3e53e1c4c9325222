// Fills device buffers for the CUDA benchmarks: hashed pseudo-random bf16 or f16 in [-1, 1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace {

template <typename T>
__device__ T from_float(float x);
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __half from_float<__half>(float x) { return __float2half(x); }

template <typename T>
__global__ void fill16(T* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    p[i] = from_float<T>(static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f);
  }
}

}  // namespace

int bench_fill_bf16(void* p, size_t n, uint64_t seed) {
  fill16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  return static_cast<int>(cudaGetLastError());
}

int bench_fill_f16(void* p, size_t n, uint64_t seed) {
  fill16<<<1024, 256>>>(static_cast<__half*>(p), n, seed);
  return static_cast<int>(cudaGetLastError());
}
