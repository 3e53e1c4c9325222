// Device-side helpers the step kernels share: grid sizing, the walk's offset arithmetic,
// stored-type loads and the fault record.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "exec/cuda/programmatic_launch.cuh"
#include "exec/cuda/step/kernels.h"

namespace kvf::exec::cuda::step {

inline cudaStream_t stream_of(const Launch& l) { return static_cast<cudaStream_t>(l.stream); }

// Grid-stride launches: enough blocks to fill the device, never more than the work needs.
inline constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// The indices of [0, n) this thread takes in a grid-stride loop:
// `for (const int64_t i : grid_stride(n))`.
class GridStride {
 public:
  struct Index {
    int64_t i, step;
    __device__ int64_t operator*() const { return i; }
    __device__ Index& operator++() {
      i += step;
      return *this;
    }
    __device__ bool operator!=(const Index& end) const { return i < end.i; }  // past the end ends too
  };
  __device__ explicit GridStride(int64_t n) : n_(n) {}
  __device__ Index begin() const {
    return {blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, static_cast<int64_t>(gridDim.x) * blockDim.x};
  }
  __device__ Index end() const { return {n_, 0}; }

 private:
  int64_t n_;
};
__device__ inline GridStride grid_stride(int64_t n) { return GridStride(n); }

// Element offset of output element i in operand k.
__device__ inline int64_t walk_offset(const Walk& w, int k, int64_t i) {
  int64_t off = 0;
  for (int a = w.rank - 1; a >= 0; --a) {
    const int64_t d = w.shape[a];
    off += (i % d) * w.stride[k][a];
    i /= d;
  }
  return off;
}

// The first fault of a step wins; later ones are dropped.
__device__ inline void raise_fault(FaultRecord* f, DeviceFault code, int eqn, int64_t value) {
  if (atomicCAS(&f->code, 0, static_cast<int32_t>(code)) == 0) {
    f->eqn = eqn;
    f->value = value;
  }
}

// Whether an earlier launch of this step faulted: writers of state do nothing after a fault.
__device__ inline bool faulted(const FaultRecord* f) { return *reinterpret_cast<const volatile int32_t*>(&f->code) != 0; }

// Element j of a row stored as `dt` (a whole number of blocks for q8_0/q4_0), as f32.
__device__ inline float load_stored(DType dt, const void* row, int64_t j) {
  switch (dt) {
    case DType::kF32: return static_cast<const float*>(row)[j];
    case DType::kF16: return __half2float(static_cast<const __half*>(row)[j]);
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(row)[j]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(row)[j]);
    case DType::kBool: return static_cast<const uint8_t*>(row)[j] ? 1.0f : 0.0f;
    case DType::kQ8_0: {
      const auto* blk = static_cast<const uint8_t*>(row) + (j / 32) * 34;
      const float d = __half2float(*reinterpret_cast<const __half*>(blk));
      return d * static_cast<float>(static_cast<int8_t>(blk[2 + j % 32]));
    }
    case DType::kQ4_0: {
      const auto* blk = static_cast<const uint8_t*>(row) + (j / 32) * 18;
      const float d = __half2float(*reinterpret_cast<const __half*>(blk));
      const int i = static_cast<int>(j % 32);
      const int q = i < 16 ? (blk[2 + i] & 15) : (blk[2 + i - 16] >> 4);
      return d * static_cast<float>(q - 8);
    }
    default: return 0.0f;
  }
}

// The sum of v over the warp's 32 lanes, in every lane (a fixed tree: deterministic).
__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// RMSNorm's 1 / rms of n elements whose squares sum to ss, in double as the oracle has it.
__device__ inline float inv_rms(float ss, int64_t n, double eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / static_cast<double>(n) + eps));
}

// The gated unit's activation of the gate value x.
__device__ inline float glu_value(GluAct act, float x) {
  switch (act) {
    case GluAct::kSilu: return x / (1.0f + expf(-x));
    case GluAct::kGeluTanh: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  }
}

// Element i of a 16-bit array (bf16 or f16): v rounded to nearest, as the rounding casts do.
__device__ inline void store_half(void* out, int64_t i, float v, bool bf16) {
  if (bf16) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  else static_cast<__half*>(out)[i] = __float2half_rn(v);
}

// Element i of a group's glu output, and of its 16-bit copy where the group hands one on.
__device__ inline void store_glu(const LinearGroup& g, int64_t i, float v) {
  g.glu_out[i] = v;
  if (g.glu_out16 != nullptr) store_half(g.glu_out16, i, v, g.glu_out16_bf16);
}

// Bytes of one row of `n` elements stored as `dt`.
__host__ __device__ inline int64_t stored_row_bytes(DType dt, int64_t n) {
  switch (dt) {
    case DType::kQ8_0: return n / 32 * 34;
    case DType::kQ4_0: return n / 32 * 18;
    case DType::kF16: case DType::kBF16: return n * 2;
    case DType::kBool: case DType::kI8: return n;
    default: return n * 4;
  }
}

}  // namespace kvf::exec::cuda::step
