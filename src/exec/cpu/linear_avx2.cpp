// Linear kernels for AVX2 + FMA + F16C, for x86 CPUs without AVX-512: f16/bf16 widened in
// registers and FMA'd in f32; q8_0/q4_0 as 8-bit integer dot products (vpmaddubsw).
// Every call streams the weights past its x rows, in the order of linear_impl.h.
// The AVX-512 body is linear_avx512.cpp; the plain reference is linear_scalar.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "exec/cpu/linear_impl.h"
#include "exec/cpu/linear_x86.h"

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
  const __m256i offset = _mm256_set1_epi32(-lane_offset(a.w.dtype));
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
      if (form == QuantForm::kLaneCorr || a.xq.sums != nullptr) {
        const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
        if (form == QuantForm::kLaneCorr) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.corr + (i * nb + b) * 8), _mm256_mullo_epi32(sums, offset));
        }
        if (a.xq.sums != nullptr) {
          const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
          const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
          a.xq.sums[i * nb + b] = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
        }
      }
      if (form == QuantForm::kUnsigned) q = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.q + i * k + b * kQBlock), q);
    }
  }
}

// q8_0 uses the sign trick and needs no correction; q4_0 and q6_k read raw unsigned quants
// and correct; q4_k and q5_k subtract their mins from x's block sums instead.
QuantForm quant_form(DType wt, bool) {
  return wt == DType::kQ4_0 || wt == DType::kQ6_K ? QuantForm::kLaneCorr : QuantForm::kSigned;
}

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

// x rows per pass over a quad: float outputs take two ymm each (the 16 lanes of the order in
// linear_impl.h), so one row's 8 accumulators fill what 16 registers leave; quant outputs take
// one xmm lane, and two rows share each loaded block.
constexpr int kMaxMXFloat = 1;
constexpr int kMaxMXQuant = 2;

// One x row · four float weight rows in the order of linear_impl.h: lanes 0-7 of an output
// in lo, 8-15 in hi; the tail adds 0·0 past k, as the wider bodies' masked lanes do.
template <DType DT>
void dot_quad_float(const float* x, int64_t k, const RowQuad& q, float (&sums)[4]) {
  __m256 lo[4], hi[4];
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    const __m256 x0 = _mm256_loadu_ps(x + c), x1 = _mm256_loadu_ps(x + c + 8);
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      const int64_t at = c * static_cast<int64_t>(DT == DType::kF32 ? 4 : 2);
      if (at % 64 == 0) prefetch_ahead(q, q.row[r] + at);
      lo[r] = _mm256_fmadd_ps(x0, load_w8<DT>(q.row[r], c), lo[r]);
      hi[r] = _mm256_fmadd_ps(x1, load_w8<DT>(q.row[r], c + 8), hi[r]);
    }
  }
  if (c < k) {
    alignas(32) float xt[16] = {}, wt[16] = {};
    for (int64_t e = c; e < k; ++e) xt[e - c] = x[e];
    const __m256 x0 = _mm256_load_ps(xt), x1 = _mm256_load_ps(xt + 8);
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      for (int64_t e = c; e < k; ++e) wt[e - c] = load_w1<DT>(q.row[r], e);
      lo[r] = _mm256_fmadd_ps(x0, _mm256_load_ps(wt), lo[r]);
      hi[r] = _mm256_fmadd_ps(x1, _mm256_load_ps(wt + 8), hi[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) sums[r] = hsum(_mm256_add_ps(lo[r], hi[r]));  // + 8, then hsum's + 4, + 2, + 1
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
void dot_quad_quant(const QuantX& xq, int64_t i, int64_t k, const RowQuad& q, __m128 (&sums)[MX]) {
  const int64_t nb = k / kQBlock;
  constexpr int64_t kBytes = DT == DType::kQ8_0 ? kQ8Bytes : kQ4Bytes;
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi) sums[xi] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m128i dw16 = _mm_setzero_si128();  // the four f16 scales, widened at once below
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      prefetch_ahead(q, q.row[r] + b * kBytes);
      dw16 = insert_u16(dw16, q.row[r] + b * kBytes, r);
    }
    const __m128 dw4 = _mm_cvtph_ps(dw16);
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (i + xi) * k + b * kQBlock));
      const __m256i cv = DT == DType::kQ4_0
                             ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.corr + ((i + xi) * nb + b) * 8))
                             : _mm256_setzero_si256();
      __m256i d[4];
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        const uint8_t* blk = q.row[r] + b * kBytes;
        d[r] = DT == DType::kQ8_0 ? q8_lanes(blk, xv) : _mm256_add_epi32(q4_lanes(blk, xv), cv);
      }
      const __m128 scale = _mm_mul_ps(dw4, _mm_set1_ps(xq.d[(i + xi) * nb + b]));
      sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(block_dots(d[0], d[1], d[2], d[3])), scale, sums[xi]);
    }
  }
}

// MX x rows · four k-quant rows, in the order of linear_impl.h, as linear_avx512.cpp's
// dot_quad_kquant computes them: the lane sums from vpmaddubsw (unsigned quants of at most
// 63 against x, pairs far from saturating) and vpmaddwd, then the same integer and float steps.
template <DType DT, int MX>
void dot_quad_kquant(const QuantX& xq, int64_t i, int64_t k, const RowQuad& q, __m128 (&sums)[MX]) {
  const int64_t nb = k / kQBlock, nsb = k / kKQuantElems;
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi) sums[xi] = _mm_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const KQuadBlock<DT> kb(q.row, sb, q.ahead);
    const auto& blk = kb.blk;
    alignas(32) float scale[4][16];  // q4_k/q5_k: [dsc 0..7, -dmn 0..7] per row
    if constexpr (DT != DType::kQ6_K) {
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        const __m128i bytes = kquant_scale_bytes(blk[r]);
        uint16_t dh, mh;
        std::memcpy(&dh, blk[r], 2);
        std::memcpy(&mh, blk[r] + 2, 2);
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes)));
        _mm256_store_ps(scale[r], _mm256_mul_ps(sc, _mm256_set1_ps(_cvtsh_ss(dh))));
        _mm256_store_ps(scale[r] + 8, _mm256_mul_ps(mn, _mm256_set1_ps(-_cvtsh_ss(mh))));
      }
    }
    [&]<int... C>(std::integer_sequence<int, C...>) {
      ([&] {
        const int64_t b = sb * kKQuantChunks + C;
        __m256i w[4];
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) w[r] = kquant_quants<DT, C>(blk[r], kquant_high_bits<DT, C>(blk[r]));
#pragma GCC unroll 16
        for (int xi = 0; xi < MX; ++xi) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (i + xi) * k + b * kQBlock));
          const float dx = xq.d[(i + xi) * nb + b];
          __m256i d[4];
#pragma GCC unroll 16
          for (int r = 0; r < 4; ++r) d[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], xv), ones);
          if constexpr (DT == DType::kQ6_K) {
            const __m256i cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.corr + ((i + xi) * nb + b) * 8));
            const __m256i scv =
                _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kb.sc_by_row[8 * (C / 4) + 2 * (C % 4)])));
            const __m256i halves =
                _mm256_mullo_epi32(half_dots(_mm256_add_epi32(d[0], cv), _mm256_add_epi32(d[1], cv),
                                             _mm256_add_epi32(d[2], cv), _mm256_add_epi32(d[3], cv)),
                                   scv);
            const __m128i dots = _mm_add_epi32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
            sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(dots), _mm_mul_ps(kb.d6, _mm_set1_ps(dx)), sums[xi]);
          } else {
            const __m128 dsc = _mm_setr_ps(scale[0][C], scale[1][C], scale[2][C], scale[3][C]);
            const __m128 ndmn = _mm_setr_ps(scale[0][8 + C], scale[1][8 + C], scale[2][8 + C], scale[3][8 + C]);
            const __m128i dots = block_dots(d[0], d[1], d[2], d[3]);
            sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(dots), _mm_mul_ps(dsc, _mm_set1_ps(dx)), sums[xi]);
            const float t = static_cast<float>(xq.sums[(i + xi) * nb + b]) * dx;
            sums[xi] = _mm_fmadd_ps(ndmn, _mm_set1_ps(t), sums[xi]);
          }
        }
      }(), ...);
    }(std::make_integer_sequence<int, kKQuantChunks>{});
  }
}

inline void store_row(const LinearArgs& a, int64_t i, int64_t j, const RowQuad& q, const float* sums) {
  float* y = a.y + i * a.y_stride + j;
  for (int r = 0; r < q.count; ++r) y[r] = a.bias ? sums[r] + a.bias[j + r] : sums[r];
}

template <DType DT, int MX>
void stream_quad(const LinearArgs& a, int64_t i, int64_t j, const RowQuad& q) {
  if constexpr (DT == DType::kQ8_0 || DT == DType::kQ4_0 || kKQuant<DT>) {
    __m128 sums[MX];
    if constexpr (kKQuant<DT>) {
      dot_quad_kquant<DT, MX>(a.xq, i, a.w.k, q, sums);
    } else {
      dot_quad_quant<DT, MX>(a.xq, i, a.w.k, q, sums);
    }
    for (int xi = 0; xi < MX; ++xi) {
      alignas(16) float s[4];
      _mm_store_ps(s, sums[xi]);
      store_row(a, i + xi, j, q, s);
    }
  } else {
    for (int xi = 0; xi < MX; ++xi) {
      float s[4];
      dot_quad_float<DT>(a.x + (i + xi) * a.x_stride, a.w.k, q, s);
      store_row(a, i + xi, j, q, s);
    }
  }
}

// Weight rows four at a time; up to kMaxMX x rows share each pass over them.
template <DType DT>
void stream_rows(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  constexpr int kMaxMX = DT == DType::kQ8_0 || DT == DType::kQ4_0 || kKQuant<DT> ? kMaxMXQuant : kMaxMXFloat;
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
    case DType::kQ4_K: return stream_rows<DType::kQ4_K>(a, i0, i1, j0, j1);
    case DType::kQ5_K: return stream_rows<DType::kQ5_K>(a, i0, i1, j0, j1);
    case DType::kQ6_K: return stream_rows<DType::kQ6_K>(a, i0, i1, j0, j1);
    default: return;
  }
}

// ---------------------------------------------------------------- GEMM

// kNR: the width of a GEMM task. Every type streams there too: a packed broadcast GEMM would
// add the products of an output in another order than the streaming kernel (linear_impl.h).
constexpr int64_t kNR = 16;

void gemm(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache&) {
  stream(a, i0, i1, j0, j1);
}

}  // namespace

const Kernels& avx2_kernels() {
  // The GEMM is the streaming kernel over (row block, 16 columns) tasks, so the crossovers
  // only choose how the work is cut.
  static const Kernels k{"avx2", kNR, 16, 3, 3, quant_form, quantize, stream, gemm, nullptr, nullptr};
  return k;
}

}  // namespace kvf::exec::cpu::detail
