// Linear layers with weights kept in their stored type (DESIGN.md §5): y = x · wᵀ (+ bias).
// Dequantization happens inside the dot products; the AVX-512 or AVX2 body is picked once
// from the CPU's features. GEMV (m = 1, decode) and GEMM (m > 1, prefill) share the entry.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace kvf::exec::cpu {

// A weight matrix exactly as the checkpoint stores it: row-major [n, k], each of the n rows
// holding k elements of dtype (F32, F16, BF16, Q8_0 or Q4_0; k a multiple of the block).
struct WeightView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t n = 0;  // output features
  int64_t k = 0;  // input features
};

// Quantized weights packed ahead for the GEMM: a call of a few rows (a batched decode) would
// otherwise pack each panel again, at twice the cost of its products for 16 rows. One
// packing serves every holder over the same weights (the executors of a model's step
// shapes); it is freed with the last. About 1.2 bytes a weight.
class PackedWeights;

// The packed form of w for calls of m rows; null where such a call streams the weights or
// packs cheaply enough per call (m past a row block), where this CPU's body packs nothing
// ahead, or where the memory (host_memory()) refuses it.
std::shared_ptr<const PackedWeights> pack_weights(ThreadPool& pool, const WeightView& w, int64_t m);

// y[i, j] = sum_c x[i, c] * w[j, c] + (bias ? bias[j] : 0) for i < m, j < w.n.
// x is f32 [m, w.k] with row stride x_stride; y is f32 [m, w.n] with row stride y_stride.
// packed: pack_weights(w) or null; the result is the same either way.
void linear(ThreadPool& pool, const float* x, int64_t m, int64_t x_stride, const WeightView& w,
            const float* bias, float* y, int64_t y_stride, const PackedWeights* packed = nullptr);

// The instruction set linear() dispatches to on this machine: "avx512", "avx2" or "scalar".
const char* linear_isa();

}  // namespace kvf::exec::cpu
