// Linear kernels for AVX2 + FMA + F16C, for x86 CPUs without AVX-512: f16/bf16 widened in
// registers and FMA'd in f32; q8_0/q4_0 as 8-bit integer dot products (vpmaddubsw).
// Quant GEMM streams the weights over blocks of x rows instead of packing them.
// The AVX-512 body is linear_avx512.cpp; the plain reference is linear_scalar.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "exec/cpu/linear_impl.h"

namespace kvf::exec::cpu::detail {
namespace {

// 8 weights of a float row from element c, widened to f32.
template <DType DT>
inline __m256 load_w8(const uint8_t* row, int64_t c) {
  if constexpr (DT == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * c));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if constexpr (DT == DType::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16: the top half of an f32
  }
}

// One weight of a float row, for the tails shorter than a vector.
template <DType DT>
inline float load_w1(const uint8_t* row, int64_t c) {
  if constexpr (DT == DType::kF32) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    if constexpr (DT == DType::kF16) return _cvtsh_ss(h);
    return bf16_bits_to_f32(h);
  }
}

inline float f16_scale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

constexpr int64_t kQ8Bytes = sizeof(BlockQ8_0), kQ4Bytes = sizeof(BlockQ4_0);

// ---------------------------------------------------------------- x quantization

void quantize(const LinearArgs& a, int64_t i0, int64_t i1, QuantForm form) {
  const int64_t k = a.w.k, nb = k / kQBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i offset = _mm256_set1_epi32(a.w.dtype == DType::kQ8_0 ? -128 : -8);
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      const float* x = a.x + i * a.x_stride + b * kQBlock;
      __m256 v[4], m = _mm256_setzero_ps();
      #pragma GCC unroll 16
      for (int t = 0; t < 4; ++t) {
        v[t] = _mm256_loadu_ps(x + 8 * t);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[t]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
      a.xq.d[i * nb + b] = amax / 127.0f;
      const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      __m256i q32[4];  // vcvtps2dq rounds half to even, like nearbyint in the scalar rule
      #pragma GCC unroll 16
      for (int t = 0; t < 4; ++t) q32[t] = _mm256_cvtps_epi32(_mm256_mul_ps(v[t], id));
      // The packs interleave 128-bit lanes; the permute puts the 32 values back in order.
      const __m256i q16a = _mm256_packs_epi32(q32[0], q32[1]), q16b = _mm256_packs_epi32(q32[2], q32[3]);
      const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
      __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
      if (form == QuantForm::kLaneCorr) {
        const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.corr + (i * nb + b) * 8), _mm256_mullo_epi32(sums, offset));
      }
      if (form == QuantForm::kUnsigned) q = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.q + i * k + b * kQBlock), q);
    }
  }
}

// q8_0 uses the sign trick and needs no correction; q4_0 reads raw nibbles and corrects.
QuantForm quant_form(DType wt, bool) { return wt == DType::kQ4_0 ? QuantForm::kLaneCorr : QuantForm::kSigned; }

// ---------------------------------------------------------------- streaming (decode, quant GEMM)

// Four weight rows (the last repeated when fewer remain). `ahead`: how far ahead the
// kernels prefetch; each quad's rows are short streams the hardware prefetcher catches
// late (see linear_avx512.cpp, where it doubled the DRAM-bound GEMV).
struct RowQuad {
  const uint8_t* row[4];
  int count;
  int64_t ahead;
};

constexpr int64_t kPrefetchBytes = 6144;

inline void prefetch_ahead(const RowQuad& q, const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + q.ahead), _MM_HINT_T0);
}

inline RowQuad row_quad(const LinearArgs& a, int64_t j, int64_t j1) {
  const auto* base = static_cast<const uint8_t*>(a.w.data);
  const int64_t rb = row_bytes(a.w);
  RowQuad q;
  q.ahead = std::max<int64_t>(4 * rb, kPrefetchBytes);
  q.count = static_cast<int>(std::min<int64_t>(4, j1 - j));
  #pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) q.row[r] = base + (j + std::min(r, q.count - 1)) * rb;
  return q;
}

// Up to this many x rows share each widened weight vector (16 ymm registers allow 2).
constexpr int kMaxMX = 2;

// MX x rows · four float weight rows; with one x row two accumulator sets (U) keep 8
// FMAs in flight.
template <DType DT, int MX>
void dot_quad_float(const float* x, int64_t x_stride, int64_t k, const RowQuad& q, float (&sums)[MX][4]) {
  constexpr int U = MX == 1 ? 2 : 1;
  __m256 acc[U][MX][4];
#pragma GCC unroll 16
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi)
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) acc[u][xi][r] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 * U <= k; c += 8 * U) {
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) {
      __m256 wv[4];
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        const int64_t at = (c + 8 * u) * static_cast<int64_t>(DT == DType::kF32 ? 4 : 2);
        if (at % 64 == 0) prefetch_ahead(q, q.row[r] + at);
        wv[r] = load_w8<DT>(q.row[r], c + 8 * u);
      }
#pragma GCC unroll 16
      for (int xi = 0; xi < MX; ++xi) {
        const __m256 xv = _mm256_loadu_ps(x + xi * x_stride + c + 8 * u);
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) acc[u][xi][r] = _mm256_fmadd_ps(wv[r], xv, acc[u][xi][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi) {
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      __m256 t = acc[0][xi][r];
      if constexpr (U == 2) t = _mm256_add_ps(t, acc[1][xi][r]);
      sums[xi][r] = hsum(t);
      for (int64_t e = c; e < k; ++e) sums[xi][r] += x[xi * x_stride + e] * load_w1<DT>(q.row[r], e);
    }
  }
}

// Lane sums (4 elements each) of one q8_0 block with 32 signed x values: vpmaddubsw wants an
// unsigned operand, so it gets |w| and x takes w's sign; |w|·|x| <= 128·127 cannot saturate.
inline __m256i q8_lanes(const uint8_t* blk, __m256i xv) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// The same for q4_0 from raw nibbles (0..15); the caller adds the -8·sum(x) lane corrections.
inline __m256i q4_lanes(const uint8_t* blk, __m256i xv) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
  const __m256i p = _mm256_maddubs_epi16(_mm256_set_m128i(hi, lo), xv);
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

template <DType DT, int MX>
void dot_quad_quant(const QuantX& xq, int64_t i, int64_t k, const RowQuad& q, float (&sums)[MX][4]) {
  const int64_t nb = k / kQBlock;
  constexpr int64_t kBytes = DT == DType::kQ8_0 ? kQ8Bytes : kQ4Bytes;
  __m256 acc[MX][4];
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) acc[xi][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[MX], cv[MX];
    float dx[MX];
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi) {
      xv[xi] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (i + xi) * k + b * kQBlock));
      cv[xi] = DT == DType::kQ4_0
                   ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.corr + ((i + xi) * nb + b) * 8))
                   : _mm256_setzero_si256();
      dx[xi] = xq.d[(i + xi) * nb + b];
    }
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      const uint8_t* blk = q.row[r] + b * kBytes;
      prefetch_ahead(q, blk);
      const float dw = f16_scale(blk);
#pragma GCC unroll 16
      for (int xi = 0; xi < MX; ++xi) {
        const __m256i dot =
            DT == DType::kQ8_0 ? q8_lanes(blk, xv[xi]) : _mm256_add_epi32(q4_lanes(blk, xv[xi]), cv[xi]);
        acc[xi][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(dw * dx[xi]), acc[xi][r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi)
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) sums[xi][r] = hsum(acc[xi][r]);
}

template <DType DT, int MX>
void stream_quad(const LinearArgs& a, int64_t i, int64_t j, const RowQuad& q) {
  float sums[MX][4];
  if constexpr (DT == DType::kQ8_0 || DT == DType::kQ4_0) {
    dot_quad_quant<DT, MX>(a.xq, i, a.w.k, q, sums);
  } else {
    dot_quad_float<DT, MX>(a.x + i * a.x_stride, a.x_stride, a.w.k, q, sums);
  }
  for (int xi = 0; xi < MX; ++xi) {
    for (int r = 0; r < q.count; ++r) {
      a.y[(i + xi) * a.y_stride + j + r] = sums[xi][r] + (a.bias ? a.bias[j + r] : 0.0f);
    }
  }
}

// Weight rows four at a time; up to kMaxMX x rows share each pass over them.
template <DType DT>
void stream_rows(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; j += 4) {
    const RowQuad q = row_quad(a, j, j1);
    int64_t i = i0;
    for (; i + kMaxMX <= i1; i += kMaxMX) stream_quad<DT, kMaxMX>(a, i, j, q);
    if (i < i1) stream_quad<DT, 1>(a, i, j, q);
  }
}

void stream(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  switch (a.w.dtype) {
    case DType::kF32: return stream_rows<DType::kF32>(a, i0, i1, j0, j1);
    case DType::kF16: return stream_rows<DType::kF16>(a, i0, i1, j0, j1);
    case DType::kBF16: return stream_rows<DType::kBF16>(a, i0, i1, j0, j1);
    case DType::kQ8_0: return stream_rows<DType::kQ8_0>(a, i0, i1, j0, j1);
    case DType::kQ4_0: return stream_rows<DType::kQ4_0>(a, i0, i1, j0, j1);
    default: return;
  }
}

// ---------------------------------------------------------------- packed float GEMM

constexpr int64_t kNR = 16;  // panel width: two ymm
constexpr int kMR = 6;       // x rows per tile: 12 accumulators + 2 weights + 1 broadcast

// Transposes 8 x 8 f32 in registers: element t of r[i] becomes element i of r[t].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Float panel: f32 [k][16], column r is weight row j0 + r (zeros past n). Built 8 rows x
// 8 elements at a time: widen, transpose in registers, store.
template <DType DT>
void pack_float(const WeightView& w, int64_t j0, int64_t nj, float* panel) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t rb = row_bytes(w), k = w.k;
  for (int64_t r0 = 0; r0 < kNR; r0 += 8) {
    const int64_t rows = std::clamp<int64_t>(nj - r0, 0, 8);
    int64_t c = 0;
    for (; c + 8 <= k; c += 8) {
      __m256 v[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) v[t] = t < rows ? load_w8<DT>(base + (j0 + r0 + t) * rb, c) : _mm256_setzero_ps();
      transpose8(v);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) _mm256_store_ps(panel + (c + t) * kNR + r0, v[t]);
    }
    for (; c < k; ++c) {
      for (int64_t t = 0; t < 8; ++t) {
        panel[c * kNR + r0 + t] = t < rows ? load_w1<DT>(base + (j0 + r0 + t) * rb, c) : 0.0f;
      }
    }
  }
}

// MR rows of x times the panel into y (+ bias); columns [0, nj) of the tile are stored.
template <int MR>
void tile_float(const float* x, int64_t x_stride, const float* panel, int64_t k, float* y, int64_t y_stride,
                const float* bias, int64_t nj) {
  alignas(32) float b[kNR] = {};
  if (bias) std::copy(bias, bias + nj, b);
  __m256 acc0[MR], acc1[MR];
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc0[r] = _mm256_load_ps(b), acc1[r] = _mm256_load_ps(b + 8);
  for (int64_t c = 0; c < k; ++c) {
    const __m256 w0 = _mm256_load_ps(panel + c * kNR), w1 = _mm256_load_ps(panel + c * kNR + 8);
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + r * x_stride + c);
      acc0[r] = _mm256_fmadd_ps(xv, w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(xv, w1, acc1[r]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* yr = y + r * y_stride;
    if (nj == kNR) {
      _mm256_storeu_ps(yr, acc0[r]);
      _mm256_storeu_ps(yr + 8, acc1[r]);
    } else {
      alignas(32) float out[kNR];
      _mm256_store_ps(out, acc0[r]);
      _mm256_store_ps(out + 8, acc1[r]);
      std::copy(out, out + nj, yr);
    }
  }
}

template <DType DT>
void gemm_float(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& cache) {
  const int64_t k = a.w.k, nj = j1 - j0;
  auto* panel = static_cast<float*>(cache.buf.get(static_cast<size_t>(k * kNR) * 4));
  if (cache.j0 != j0) pack_float<DT>(a.w, j0, nj, panel);
  cache.j0 = j0;
  const float* bias = a.bias ? a.bias + j0 : nullptr;
  auto tile = [&](auto mr, int64_t i) {
    tile_float<decltype(mr)::value>(a.x + i * a.x_stride, a.x_stride, panel, k, a.y + i * a.y_stride + j0, a.y_stride,
                                    bias, nj);
  };
  int64_t i = i0;
  for (; i + kMR <= i1; i += kMR) tile(std::integral_constant<int, kMR>{}, i);
  [&]<int... R>(std::integer_sequence<int, R...>) {
    ((i1 - i == R + 1 ? tile(std::integral_constant<int, R + 1>{}, i) : void()), ...);
  }(std::make_integer_sequence<int, kMR - 1>{});
}

void gemm(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& cache) {
  switch (a.w.dtype) {
    case DType::kF32: return gemm_float<DType::kF32>(a, i0, i1, j0, j1, cache);
    case DType::kF16: return gemm_float<DType::kF16>(a, i0, i1, j0, j1, cache);
    case DType::kBF16: return gemm_float<DType::kBF16>(a, i0, i1, j0, j1, cache);
    case DType::kQ8_0: return stream_rows<DType::kQ8_0>(a, i0, i1, j0, j1);
    case DType::kQ4_0: return stream_rows<DType::kQ4_0>(a, i0, i1, j0, j1);
    default: return;
  }
}

}  // namespace

const Kernels& avx2_kernels() {
  // Crossover, one thread, f16 768x768 (us, stream vs gemm): m=16 239 vs 255, m=32 483 vs
  // 477. Quant gemm is stream here.
  static const Kernels k{"avx2", kNR, 16, 3, 3, quant_form, quantize, stream, gemm};
  return k;
}

}  // namespace kvf::exec::cpu::detail
