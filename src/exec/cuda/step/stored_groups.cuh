// Rows of stored weights read as 8-element groups and widened in registers, and the
// multiply-add of such a group against up to 8 rows of f32 x: the decode products' inner
// loop (linear.cu's GEMV, moe.cu's experts).
#pragma once

#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {

// acc[r] += sum_i w[i] * x[r][k0 + i] for 8 consecutive weights w[].
template <int MR>
__device__ void fma8(float (&acc)[MR], const float (&w)[8], const float* x, int64_t k, int64_t k0) {
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    const float4 a = *reinterpret_cast<const float4*>(x + r * k + k0);
    const float4 b = *reinterpret_cast<const float4*>(x + r * k + k0 + 4);
    acc[r] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z + w[7] * b.w;
  }
}

// Weights as 8-element groups; group g of a row lies at element 8g. Needs k % 8 == 0 (the
// dispatcher's check) and, for quantized rows, k % 32 == 0.
template <DType dt>
__device__ void load8(const uint8_t* row, int64_t g, float (&w)[8]) {
  switch (dt) {
    case DType::kF32: {
      const float4 a = reinterpret_cast<const float4*>(row)[2 * g], b = reinterpret_cast<const float4*>(row)[2 * g + 1];
      w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w; w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
      return;
    }
    case DType::kF16: return gemv16_detail::widen<DType::kF16>(reinterpret_cast<const uint4*>(row)[g], w);
    case DType::kBF16: return gemv16_detail::widen<DType::kBF16>(reinterpret_cast<const uint4*>(row)[g], w);
    case DType::kQ8_0: {
      const uint8_t* blk = row + (g / 4) * 34;
      const float d = __half2float(*reinterpret_cast<const __half*>(blk));
      const auto* q = reinterpret_cast<const uint16_t*>(blk + 2 + (g % 4) * 8);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint16_t p = q[i];
        w[2 * i] = d * static_cast<float>(static_cast<int8_t>(p & 0xff));
        w[2 * i + 1] = d * static_cast<float>(static_cast<int8_t>(p >> 8));
      }
      return;
    }
    case DType::kQ4_0: {  // group g % 4: quarters of the block's 32 values (low nibbles first)
      const uint8_t* blk = row + (g / 4) * 18;
      const float d = __half2float(*reinterpret_cast<const __half*>(blk));
      const int part = static_cast<int>(g % 4);
      const auto* q = reinterpret_cast<const uint16_t*>(blk + 2 + (part % 2) * 8);
      const int shift = part < 2 ? 0 : 4;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint16_t p = q[i];
        w[2 * i] = d * static_cast<float>(((p & 0xff) >> shift & 15) - 8);
        w[2 * i + 1] = d * static_cast<float>(((p >> 8) >> shift & 15) - 8);
      }
      return;
    }
    default:
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = 0.0f;
  }
}

}  // namespace kvf::exec::cuda::step
