// Linear kernels in plain C++: the fallback for CPUs without AVX2, and the shared scalar
// pieces (x quantization rule, block decoding) the SIMD bodies use at their edges.
// Not fast; the AVX2 and AVX-512 bodies are in linear_avx2.cpp and linear_avx512.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kquants.h"
#include "exec/cpu/linear_impl.h"

namespace kvf::exec::cpu::detail {

void quantize_block(const float* x, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int64_t c = 0; c < kQBlock; ++c) amax = std::max(amax, std::fabs(x[c]));
  *d = amax / 127.0f;
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  // nearbyint rounds half to even in the default mode, as vcvtps2dq does.
  for (int64_t c = 0; c < kQBlock; ++c) q[c] = static_cast<int8_t>(std::nearbyint(x[c] * id));
}

void quantize_rows_scalar(const LinearArgs& a, int64_t i0, int64_t i1, QuantForm form) {
  const int64_t k = a.w.k, nb = k / kQBlock;
  const int offset = lane_offset(a.w.dtype);
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      int8_t* q = a.xq.q + i * k + b * kQBlock;
      quantize_block(a.x + i * a.x_stride + b * kQBlock, q, a.xq.d + i * nb + b);
      if (a.xq.sums != nullptr) {
        int32_t sum = 0;
        for (int64_t c = 0; c < kQBlock; ++c) sum += q[c];
        a.xq.sums[i * nb + b] = sum;
      }
      if (form == QuantForm::kLaneCorr) {
        int32_t* corr = a.xq.corr + (i * nb + b) * 8;
        for (int l = 0; l < 8; ++l) corr[l] = -offset * (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
      }
      if (form == QuantForm::kUnsigned) {
        for (int64_t c = 0; c < kQBlock; ++c) q[c] = static_cast<int8_t>(static_cast<uint8_t>(q[c]) ^ 0x80u);
      }
    }
  }
}

float kquant_chunk_dot(DType wt, const void* row, int64_t b, const int8_t* q, float dx, int32_t xsum, float acc) {
  const auto* blk = static_cast<const uint8_t*>(row) + b / kKQuantChunks * block_bytes(wt);
  KQuantChunk ch;
  kquant_chunk(wt, blk, static_cast<int>(b % kKQuantChunks), ch);
  if (wt == DType::kQ6_K) {
    int32_t half[2] = {0, 0};
    for (int c = 0; c < 32; ++c) half[c / 16] += (ch.q[c] - 32) * q[c];
    return std::fma(static_cast<float>(ch.sc[0] * half[0] + ch.sc[1] * half[1]), ch.d * dx, acc);
  }
  int32_t dot = 0;
  for (int c = 0; c < 32; ++c) dot += ch.q[c] * q[c];
  acc = std::fma(static_cast<float>(dot), ch.dsc * dx, acc);
  return std::fma(-ch.dmn, static_cast<float>(xsum) * dx, acc);
}

float quant_block_scale(DType wt, const void* row, int64_t b) {
  const int64_t bytes = wt == DType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  const auto* base = static_cast<const uint8_t*>(row) + b * bytes;
  uint16_t h;
  std::memcpy(&h, base, 2);  // both layouts open with the f16 scale
  return f16_bits_to_f32(h);
}

int32_t quant_block_dot(DType wt, const void* row, int64_t b, const int8_t* q) {
  // Byte offsets, not BlockQ8_0 pointers: the rows need not be 2-byte aligned.
  int32_t dot = 0;
  if (wt == DType::kQ8_0) {
    const auto* qs = reinterpret_cast<const int8_t*>(static_cast<const uint8_t*>(row) + b * sizeof(BlockQ8_0) + 2);
    for (int c = 0; c < 32; ++c) dot += qs[c] * q[c];
  } else {
    const auto* qs = static_cast<const uint8_t*>(row) + b * sizeof(BlockQ4_0) + 2;
    for (int c = 0; c < 16; ++c) {
      dot += ((qs[c] & 15) - 8) * q[c];
      dot += ((qs[c] >> 4) - 8) * q[c + 16];
    }
  }
  return dot;
}

int64_t row_bytes(const WeightView& w) {
  return w.k / block_elems(w.dtype) * block_bytes(w.dtype);
}

namespace {

float float_weight(DType dt, const uint8_t* row, int64_t c) {
  if (dt == DType::kF32) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * c, 2);
  return dt == DType::kF16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

// The orders of linear_impl.h, spelled out with std::fma: the bodies must equal these bits.
float dot_float_row(const LinearArgs& a, int64_t i, const uint8_t* row) {
  const float* x = a.x + i * a.x_stride;
  float lanes[kDotLanes] = {};
  for (int64_t c = 0; c < a.w.k; c += kDotLanes) {
    for (int l = 0; l < kDotLanes; ++l) {
      const bool in = c + l < a.w.k;
      lanes[l] = std::fma(in ? x[c + l] : 0.0f, in ? float_weight(a.w.dtype, row, c + l) : 0.0f, lanes[l]);
    }
  }
  return reduce_lanes(lanes);
}

float dot_quant_row(const LinearArgs& a, int64_t i, const uint8_t* row) {
  const int64_t nb = a.w.k / kQBlock;
  float acc = 0.0f;
  if (is_kquant(a.w.dtype)) {
    for (int64_t b = 0; b < nb; ++b) {
      const int32_t xsum = a.xq.sums != nullptr ? a.xq.sums[i * nb + b] : 0;
      acc = kquant_chunk_dot(a.w.dtype, row, b, a.xq.q + i * a.w.k + b * kQBlock, a.xq.d[i * nb + b], xsum, acc);
    }
    return acc;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int32_t dot = quant_block_dot(a.w.dtype, row, b, a.xq.q + i * a.w.k + b * kQBlock);
    acc = std::fma(static_cast<float>(dot), quant_block_scale(a.w.dtype, row, b) * a.xq.d[i * nb + b], acc);
  }
  return acc;
}

void stream_scalar(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const auto* base = static_cast<const uint8_t*>(a.w.data);
  const int64_t rb = row_bytes(a.w);
  const bool quant = is_block_quant(a.w.dtype);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* row = base + j * rb;
    for (int64_t i = i0; i < i1; ++i) {
      const float sum = quant ? dot_quant_row(a, i, row) : dot_float_row(a, i, row);
      a.y[i * a.y_stride + j] = a.bias ? sum + a.bias[j] : sum;
    }
  }
}

void gemm_scalar(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache&) {
  stream_scalar(a, i0, i1, j0, j1);
}

QuantForm quant_form_scalar(DType, bool) { return QuantForm::kSigned; }

}  // namespace

const Kernels& scalar_kernels() {
  // gemm is stream here, so the crossover does not matter.
  static const Kernels k{"scalar", 16, 4, 4, 4, quant_form_scalar, quantize_rows_scalar, stream_scalar, gemm_scalar, nullptr,
                         nullptr};
  return k;
}

}  // namespace kvf::exec::cpu::detail
