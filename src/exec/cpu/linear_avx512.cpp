// Linear kernels for AVX-512 (F, BW, VL, DQ, VNNI): f16/bf16 widened in registers and FMA'd
// in f32; q8_0/q4_0 as integer dot products (vpdpbusd) with an 8-bit x and per-block scales.
// Built only with the AVX-512 flags (src/CMakeLists.txt); linear.cpp calls it only when
// the CPU has them. The plain reference body is linear_scalar.cpp.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own _mm512_undefined_*()
// placeholders once inlined (GCC PR 105593); nothing here is read uninitialized.
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/kquants.h"
#include "exec/cpu/linear_impl.h"
#include "exec/cpu/linear_x86.h"

namespace kvf::exec::cpu::detail {
namespace {

// ---------------------------------------------------------------- loads and conversions

inline __mmask16 low_mask(int64_t count) {  // the low `count` lanes (0..16)
  return count >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << count) - 1);
}

// 16 weights of a float row from element c, widened to f32 (lanes outside `mk` read as 0).
template <DType DT>
inline __m512 load_w16(const uint8_t* row, int64_t c, __mmask16 mk = 0xffff) {
  if constexpr (DT == DType::kF32) {
    return _mm512_maskz_loadu_ps(mk, row + 4 * c);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mk, row + 2 * c);
    if constexpr (DT == DType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16: the top half of an f32
  }
}

template <DType DT>
inline __m512 load_w16_full(const uint8_t* row, int64_t c) {
  if constexpr (DT == DType::kF32) {
    return _mm512_loadu_ps(row + 4 * c);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
    if constexpr (DT == DType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

inline float f16_scale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

constexpr int64_t kQ8Bytes = sizeof(BlockQ8_0), kQ4Bytes = sizeof(BlockQ4_0);

// The 32 weights of a q4_0 block as unsigned nibbles (0..15), in element order.
inline __m256i q4_nibbles(const uint8_t* blk) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
  const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
  return _mm256_set_m128i(hi, lo);
}

// Transposes 16 x 16 32-bit values in registers: element t of r[i] becomes element i of r[t].
// Four rounds of in-lane and cross-lane shuffles (64 in all), so packing a panel costs a
// fraction of an op per weight instead of a scalar store per weight.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
#pragma GCC unroll 16
  for (int j = 0; j < 8; ++j) {
    const int i = j / 4 * 8 + j % 4;  // rows 0-3 and 8-11 pair with the row four further on
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
  }
#pragma GCC unroll 16
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

// ---------------------------------------------------------------- x quantization

// One block of 32 values by the shared rule (linear_impl.h); returns q as 32 int8.
inline __m256i quantize_block32(const float* x, float* d) {
  const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  *d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  // vcvtps2dq rounds half to even (MXCSR default), like nearbyint in the scalar rule.
  const __m128i qa = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(a, id)));
  const __m128i qb = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(b, id)));
  return _mm256_set_m128i(qb, qa);
}

void quantize(const LinearArgs& a, int64_t i0, int64_t i1, QuantForm form) {
  const int64_t k = a.w.k, nb = k / kQBlock;
  const __m256i offset = _mm256_set1_epi32(-lane_offset(a.w.dtype));
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q = quantize_block32(a.x + i * a.x_stride + b * kQBlock, a.xq.d + i * nb + b);
      if (form == QuantForm::kLaneCorr || a.xq.sums != nullptr) {
        const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
        if (form == QuantForm::kLaneCorr) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.corr + (i * nb + b) * 8), _mm256_mullo_epi32(sums, offset));
        }
        if (a.xq.sums != nullptr) a.xq.sums[i * nb + b] = _mm512_reduce_add_epi32(_mm512_zextsi256_si512(sums));
      }
      if (form == QuantForm::kUnsigned) q = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.xq.q + i * k + b * kQBlock), q);
    }
  }
}

// Streamed q4_k/q5_k quants are unsigned already: vpdpbusd takes them against a signed x.
QuantForm quant_form(DType wt, bool stream) {
  if (!stream) return QuantForm::kUnsigned;
  return wt == DType::kQ4_K || wt == DType::kQ5_K ? QuantForm::kSigned : QuantForm::kLaneCorr;
}

// ---------------------------------------------------------------- streaming (decode)

// Four weight rows (the last repeated when fewer remain). The kernels prefetch `ahead`
// bytes past what they read (at least the next quad): each quad's rows are short streams
// the hardware prefetcher catches late. It halved the DRAM-bound GEMV (32000x768, one
// thread: f16 3.3 -> 1.7 ms, q8_0 3.2 -> 0.85 ms, against ~25 GB/s of read bandwidth).
struct RowQuad {
  const uint8_t* row[4];
  int count;
  int64_t ahead;
};

// At least this far ahead: ~DRAM latency × one core's bandwidth, with margin.
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

// ---------------------------------------------------------------- the order of the sums

// The lane tree of linear_impl.h (t[l] + t[l + 8], then + 4, + 2, + 1) on four accumulators
// at once; returns their four totals in order.
inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // + 8: [a_h8, b_h8] and [c_h8, d_h8], each h8 the sum of a vector's 256-bit halves.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
  // + 4: one 128-bit quarter per vector, [a_h4, b_h4, c_h4, d_h4].
  const __m512 h4 = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
  // + 2, then + 1, inside each quarter; its lane 0 holds the total.
  const __m512 h2 = _mm512_add_ps(h4, _mm512_permute_ps(h4, 0x4e));
  const __m512 h1 = _mm512_add_ps(h2, _mm512_permute_ps(h2, 0xb1));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), h1));
}

// Stores sums[xi][r] (+ bias) for x rows i.. i+MX-1 and the quad's valid rows.
template <int MX>
inline void store_quad(const LinearArgs& a, int64_t i, int64_t j, const RowQuad& q, const __m128 (&sums)[MX]) {
  for (int xi = 0; xi < MX; ++xi) {
    alignas(16) float s[4];
    _mm_store_ps(s, sums[xi]);
    float* y = a.y + (i + xi) * a.y_stride + j;
    for (int r = 0; r < q.count; ++r) y[r] = a.bias ? s[r] + a.bias[j + r] : s[r];
  }
}

// MX x rows · NQ quads of float weight rows, one kDotLanes-lane accumulator per output, in
// the order of linear_impl.h (the last, partial 16 elements masked: 0·0); each weight vector
// is widened once and used MX times. A single x row takes two quads, so that eight FMA
// chains hide the FMA latency as a second set of partial sums once did.
template <DType DT, int MX, int NQ>
void dot_quads_float(const float* x, int64_t x_stride, int64_t k, const RowQuad (&q)[NQ], __m128 (&sums)[MX][NQ]) {
  __m512 acc[MX][NQ][4];
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi)
#pragma GCC unroll 16
    for (int u = 0; u < NQ; ++u)
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) acc[xi][u][r] = _mm512_setzero_ps();
  auto step = [&](int64_t c, __mmask16 mk, auto full) {
    __m512 wv[NQ][4];
#pragma GCC unroll 16
    for (int u = 0; u < NQ; ++u)
#pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        if constexpr (decltype(full)::value) {
          prefetch_ahead(q[u], q[u].row[r] + c * static_cast<int64_t>(DT == DType::kF32 ? 4 : 2));
          wv[u][r] = load_w16_full<DT>(q[u].row[r], c);
        } else {
          wv[u][r] = load_w16<DT>(q[u].row[r], c, mk);
        }
      }
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi) {
      const __m512 xv = decltype(full)::value ? _mm512_loadu_ps(x + xi * x_stride + c)
                                              : _mm512_maskz_loadu_ps(mk, x + xi * x_stride + c);
#pragma GCC unroll 16
      for (int u = 0; u < NQ; ++u)
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) acc[xi][u][r] = _mm512_fmadd_ps(xv, wv[u][r], acc[xi][u][r]);
    }
  };
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) step(c, __mmask16(0xffff), std::true_type{});
  if (c < k) step(c, low_mask(k - c), std::false_type{});
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi)
#pragma GCC unroll 16
    for (int u = 0; u < NQ; ++u) sums[xi][u] = reduce4(acc[xi][u][0], acc[xi][u][1], acc[xi][u][2], acc[xi][u][3]);
}

// MX x rows (QuantForm::kLaneCorr) · four q8_0/q4_0 rows. Per block vpdpbusd takes the
// weights as the unsigned operand (q8_0 shifted by +128, q4_0 as raw nibbles) and starts
// from the lane corrections of x, which remove that offset exactly; the block's four dots
// then scale into the running sums in block order.
template <DType DT, int MX>
void dot_quad_quant(const QuantX& xq, int64_t i, int64_t k, const RowQuad& q, __m128 (&sums)[MX]) {
  const int64_t nb = k / kQBlock;
  constexpr int64_t kBytes = DT == DType::kQ8_0 ? kQ8Bytes : kQ4Bytes;
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi) sums[xi] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i xv[MX], cv[MX];
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi) {
      xv[xi] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (i + xi) * k + b * kQBlock));
      cv[xi] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.corr + ((i + xi) * nb + b) * 8));
    }
    __m256i w[4];
    __m128i dw16 = _mm_setzero_si128();  // the four f16 scales, widened at once below
#pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      const uint8_t* blk = q.row[r] + b * kBytes;
      prefetch_ahead(q, blk);
      if constexpr (DT == DType::kQ8_0) {
        w[r] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)),
                                _mm256_set1_epi8(static_cast<char>(0x80)));
      } else {
        w[r] = q4_nibbles(blk);
      }
      dw16 = insert_u16(dw16, blk, r);
    }
    const __m128 dw4 = _mm_cvtph_ps(dw16);
#pragma GCC unroll 16
    for (int xi = 0; xi < MX; ++xi) {
      const __m128i dots = block_dots(_mm256_dpbusd_epi32(cv[xi], w[0], xv[xi]), _mm256_dpbusd_epi32(cv[xi], w[1], xv[xi]),
                                      _mm256_dpbusd_epi32(cv[xi], w[2], xv[xi]), _mm256_dpbusd_epi32(cv[xi], w[3], xv[xi]));
      const __m128 scale = _mm_mul_ps(dw4, _mm_set1_ps(xq.d[(i + xi) * nb + b]));
      sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(dots), scale, sums[xi]);
    }
  }
}

// ---------------------------------------------------------------- k-quants, streamed

// A q4_k/q5_k super-block's eight chunk scales and mins as f32, [dsc 0..7, -dmn 0..7].
inline __m512 kquant_scales(const uint8_t* blk) {
  const __m512 mul = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(f16_scale(blk)), _mm512_set1_ps(-f16_scale(blk + 2)));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(kquant_scale_bytes(blk))), mul);
}

// Four rows of 16 floats to 16 columns of four: column c lands at out + 16 (c % 4) + 4 (c / 4).
inline void columns4x16(__m512 r0, __m512 r1, __m512 r2, __m512 r3, float* out) {
  const __m512d a = _mm512_castps_pd(_mm512_unpacklo_ps(r0, r1)), b = _mm512_castps_pd(_mm512_unpackhi_ps(r0, r1));
  const __m512d c = _mm512_castps_pd(_mm512_unpacklo_ps(r2, r3)), d = _mm512_castps_pd(_mm512_unpackhi_ps(r2, r3));
  _mm512_store_ps(out, _mm512_castpd_ps(_mm512_unpacklo_pd(a, c)));
  _mm512_store_ps(out + 16, _mm512_castpd_ps(_mm512_unpackhi_pd(a, c)));
  _mm512_store_ps(out + 32, _mm512_castpd_ps(_mm512_unpacklo_pd(b, d)));
  _mm512_store_ps(out + 48, _mm512_castpd_ps(_mm512_unpackhi_pd(b, d)));
}

inline __m128 column(const float* cols, int c) { return _mm_load_ps(cols + 16 * (c % 4) + 4 * (c / 4)); }

// MX x rows · four k-quant rows, in the order of linear_impl.h. q4_k/q5_k: the unsigned quants
// against the signed x, then the chunk's scale and its min (times x's block sum); q6_k: lanes
// from x's corrections (-32 · its lane sums), summed per half chunk, times the halves' scales
// (one multiply for the four rows), then the halves added: all exact.
template <DType DT, int MX>
void dot_quad_kquant(const QuantX& xq, int64_t i, int64_t k, const RowQuad& q, __m128 (&sums)[MX]) {
  const int64_t nb = k / kQBlock, nsb = k / kKQuantElems;
#pragma GCC unroll 16
  for (int xi = 0; xi < MX; ++xi) sums[xi] = _mm_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const KQuadBlock<DT> kb(q.row, sb, q.ahead);
    const auto& blk = kb.blk;
    alignas(64) float cols[64];
    if constexpr (DT != DType::kQ6_K) {
      columns4x16(kquant_scales(blk[0]), kquant_scales(blk[1]), kquant_scales(blk[2]), kquant_scales(blk[3]), cols);
    }
    [&]<int... C>(std::integer_sequence<int, C...>) {
      ([&] {
        const int64_t b = sb * kKQuantChunks + C;
        __m256i w[4], scv = _mm256_setzero_si256();
#pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) w[r] = kquant_quants<DT, C>(blk[r], kquant_high_bits<DT, C>(blk[r]));
        if constexpr (DT == DType::kQ6_K) {  // [the rows' first-half scales | their second-half scales]
          scv = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(kb.sc_by_row[8 * (C / 4) + 2 * (C % 4)])));
        }
#pragma GCC unroll 16
        for (int xi = 0; xi < MX; ++xi) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.q + (i + xi) * k + b * kQBlock));
          const float dx = xq.d[(i + xi) * nb + b];
          if constexpr (DT == DType::kQ6_K) {
            const __m256i cv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.corr + ((i + xi) * nb + b) * 8));
            const __m256i halves = _mm256_mullo_epi32(
                half_dots(_mm256_dpbusd_epi32(cv, w[0], xv), _mm256_dpbusd_epi32(cv, w[1], xv),
                          _mm256_dpbusd_epi32(cv, w[2], xv), _mm256_dpbusd_epi32(cv, w[3], xv)),
                scv);
            const __m128i dots = _mm_add_epi32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
            sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(dots), _mm_mul_ps(kb.d6, _mm_set1_ps(dx)), sums[xi]);
          } else {
            const __m256i z = _mm256_setzero_si256();
            const __m128i dots = block_dots(_mm256_dpbusd_epi32(z, w[0], xv), _mm256_dpbusd_epi32(z, w[1], xv),
                                            _mm256_dpbusd_epi32(z, w[2], xv), _mm256_dpbusd_epi32(z, w[3], xv));
            sums[xi] = _mm_fmadd_ps(_mm_cvtepi32_ps(dots), _mm_mul_ps(column(cols, C), _mm_set1_ps(dx)), sums[xi]);
            const float t = static_cast<float>(xq.sums[(i + xi) * nb + b]) * dx;
            sums[xi] = _mm_fmadd_ps(column(cols, 8 + C), _mm_set1_ps(t), sums[xi]);
          }
        }
      }(), ...);
    }(std::make_integer_sequence<int, kKQuantChunks>{});
  }
}

template <DType DT, int MX, int NQ>
void quads(const LinearArgs& a, int64_t i, int64_t j, const RowQuad (&q)[NQ]) {
  __m128 sums[MX][NQ];
  if constexpr (DT == DType::kQ8_0 || DT == DType::kQ4_0 || kKQuant<DT>) {
    static_assert(NQ == 1);
    __m128 s[MX];
    if constexpr (kKQuant<DT>) {
      dot_quad_kquant<DT, MX>(a.xq, i, a.w.k, q[0], s);
    } else {
      dot_quad_quant<DT, MX>(a.xq, i, a.w.k, q[0], s);
    }
    for (int xi = 0; xi < MX; ++xi) sums[xi][0] = s[xi];
  } else {
    dot_quads_float<DT, MX, NQ>(a.x + i * a.x_stride, a.x_stride, a.w.k, q, sums);
  }
  for (int u = 0; u < NQ; ++u) {
    __m128 col[MX];
    for (int xi = 0; xi < MX; ++xi) col[xi] = sums[xi][u];
    store_quad<MX>(a, i, j + 4 * u, q[u], col);
  }
}

// Up to this many x rows share each decoded weight vector.
constexpr int kMaxMX = 4;

// Streams weight rows [j0, j1) past x rows [i0, i1): four weight rows at a time (eight for
// one float x row), up to kMaxMX x rows per pass over them.
template <DType DT>
void stream_rows(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  constexpr bool kFloat = DT == DType::kF32 || DT == DType::kF16 || DT == DType::kBF16;
  int64_t j = j0;
  if constexpr (kFloat) {
    for (; i1 - i0 == 1 && j + 8 <= j1; j += 8) {
      const RowQuad q[2] = {row_quad(a, j, j1), row_quad(a, j + 4, j1)};
      quads<DT, 1, 2>(a, i0, j, q);
    }
  }
  for (; j < j1; j += 4) {
    const RowQuad q[1] = {row_quad(a, j, j1)};
    int64_t i = i0;
    for (; i + kMaxMX <= i1; i += kMaxMX) quads<DT, kMaxMX, 1>(a, i, j, q);
    if (i == i1) continue;
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((i1 - i == R + 1 ? quads<DT, R + 1, 1>(a, i, j, q) : void()), ...);
    }(std::make_integer_sequence<int, kMaxMX - 1>{});
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

// ---------------------------------------------------------------- packed GEMM (prefill)

constexpr int64_t kNR = 32;  // panel width: two zmm of int32 lanes; the float tasks' width too
// Tile heights; 12 and 6 measured no faster (one thread, 768x768, m=512: f32 159 vs 163,
// q8_0 479 vs 509 GFLOP/s).
constexpr int kMRFloat = 8;  // x rows per float tile: 16 accumulators
constexpr int kMRQuant = 4;  // x rows per quant tile: 8 int32 + 8 f32 accumulators

// Output columns of a panel: masks of the valid lanes in each of its two vectors.
struct PanelOut {
  float* y;            // y at (i0, j0)
  int64_t y_stride;
  const float* bias;   // bias + j0, or null
  __mmask16 m0, m1;
};

// The bias comes last (linear_impl.h): y = sum + bias.
inline void store_acc(const PanelOut& o, int64_t r, __m512 a0, __m512 a1) {
  if (o.bias) {
    a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(o.m0, o.bias));
    a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(o.m1, o.bias + 16));
  }
  _mm512_mask_storeu_ps(o.y + r * o.y_stride, o.m0, a0);
  _mm512_mask_storeu_ps(o.y + r * o.y_stride + 16, o.m1, a1);
}

// Quant panel, per block b: the int8 weights in vpdpbusd order [8 groups][32 columns][4],
// then corr[32] = -128 · (sum of the column's 32 weights) (x comes as q + 128), then the
// f32 scales dw[32]. Columns past n are all zero.
constexpr int64_t kQPanelWeights = 8 * kNR * 4;
constexpr int64_t kQPanelBlock = kQPanelWeights + 2 * kNR * 4;

// The 32 weights of a q8_0/q4_0 block as int8 (q4_0 shifted to -8..7).
template <DType DT>
inline __m256i block_weights(const uint8_t* blk) {
  if constexpr (DT == DType::kQ8_0) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  return _mm256_sub_epi8(q4_nibbles(blk), _mm256_set1_epi8(8));
}

// 16 rows at a time: each row's block is 8 dwords of 4 weights; transposing 16 rows x 8
// dwords gives the 8 vpdpbusd vectors directly.
template <DType DT>
void pack_quant(const WeightView& w, int64_t j0, int64_t nj, uint8_t* panel) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t rb = row_bytes(w), nb = w.k / kQBlock;
  constexpr int64_t kBytes = DT == DType::kQ8_0 ? kQ8Bytes : kQ4Bytes;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t r0 = 0; r0 < kNR; r0 += 16) {
    const int64_t rows = std::clamp<int64_t>(nj - r0, 0, 16);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* pb = panel + b * kQPanelBlock;
      __m512 v[16];
      alignas(64) float scale[16] = {};
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) {
        if (t < rows) {
          const uint8_t* blk = base + (j0 + r0 + t) * rb + b * kBytes;
          v[t] = _mm512_castsi512_ps(_mm512_zextsi256_si512(block_weights<DT>(blk)));
          scale[t] = f16_scale(blk);
        } else {
          v[t] = _mm512_setzero_ps();
        }
      }
      transpose16(v);
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int g = 0; g < 8; ++g) {
        const __m512i wg = _mm512_castps_si512(v[g]);
        _mm512_store_si512(pb + (g * kNR + r0) * 4, wg);
        sum = _mm512_dpbusd_epi32(sum, ones, wg);  // per row: the sum of its signed weights
      }
      _mm512_store_si512(pb + kQPanelWeights + r0 * 4, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)));
      _mm512_store_ps(pb + kQPanelWeights + (kNR + r0) * 4, _mm512_load_ps(scale));
    }
  }
}

// MR rows of x (QuantForm::kUnsigned) times a quant panel. Per block the int32 sums start
// from corr, take 8 vpdpbusd steps of 4 elements, and are scaled by dx·dw into f32.
template <int MR>
void tile_quant(const uint8_t* xu, const float* dx, int64_t k, const uint8_t* panel, const PanelOut& o) {
  const int64_t nb = k / kQBlock;
  __m512 acc0[MR], acc1[MR];
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc0[r] = _mm512_setzero_ps(), acc1[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = panel + b * kQPanelBlock;
    __m512i s0[MR], s1[MR];
    const __m512i c0 = _mm512_load_si512(pb + kQPanelWeights), c1 = _mm512_load_si512(pb + kQPanelWeights + 64);
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) s0[r] = c0, s1[r] = c1;
    #pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      const __m512i w0 = _mm512_load_si512(pb + g * kNR * 4), w1 = _mm512_load_si512(pb + g * kNR * 4 + 64);
      #pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i xv = _mm512_set1_epi32(load_i32(xu + r * k + b * kQBlock + 4 * g));
        s0[r] = _mm512_dpbusd_epi32(s0[r], xv, w0);
        s1[r] = _mm512_dpbusd_epi32(s1[r], xv, w1);
      }
    }
    const __m512 dw0 = _mm512_load_ps(pb + kQPanelWeights + kNR * 4);
    const __m512 dw1 = _mm512_load_ps(pb + kQPanelWeights + kNR * 4 + 64);
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 d = _mm512_set1_ps(dx[r * nb + b]);
      acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[r]), _mm512_mul_ps(dw0, d), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[r]), _mm512_mul_ps(dw1, d), acc1[r]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) store_acc(o, r, acc0[r], acc1[r]);
}

// Runs tile<MR> over rows [i0, i1) in steps of MR, then one narrower tile for the rest.
template <int MR, class Tile>
void for_row_tiles(int64_t i0, int64_t i1, const Tile& tile) {
  int64_t i = i0;
  for (; i + MR <= i1; i += MR) tile(std::integral_constant<int, MR>{}, i);
  if (i == i1) return;
  if constexpr (MR > 1) {
    [&]<int... R>(std::integer_sequence<int, R...>) {
      ((i1 - i == R + 1 ? tile(std::integral_constant<int, R + 1>{}, i) : void()), ...);
    }(std::make_integer_sequence<int, MR - 1>{});
  }
}

PanelOut panel_out(const LinearArgs& a, int64_t i0, int64_t j0, int64_t j1) {
  const int64_t nj = j1 - j0;
  return PanelOut{a.y + i0 * a.y_stride + j0, a.y_stride, a.bias ? a.bias + j0 : nullptr, low_mask(nj),
                  low_mask(std::max<int64_t>(0, nj - 16))};
}

// The float GEMM adds in the order of linear_impl.h with broadcast FMAs over packed panels:
// lane l of an output sums the elements c = 16 t + l, so each lane is a GEMM of its own over
// t, run one after another, and the 16 lane results then add as the tree says, column-wise.
//
// Float panel: the weights of 32 rows (column r: weight row j0 + r, zeros past n), lane by
// lane: element c = 16 t + l at panel[(l * T + t) * 32 + r], T = ceil(k / 16), zeros past k.
// Built 16 rows x 16 elements at a time: widen, transpose in registers, store.
inline int64_t panel_steps(int64_t k) { return (k + 15) / 16; }

template <DType DT>
void pack_float(const WeightView& w, int64_t j0, int64_t nj, float* panel) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t rb = row_bytes(w), k = w.k, steps = panel_steps(k);
  for (int64_t r0 = 0; r0 < kNR; r0 += 16) {
    const int64_t rows = std::clamp<int64_t>(nj - r0, 0, 16);
    for (int64_t c = 0; c < k; c += 16) {
      const __mmask16 mk = low_mask(k - c);
      __m512 v[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) {
        v[t] = t < rows ? load_w16<DT>(base + (j0 + r0 + t) * rb, c, mk) : _mm512_setzero_ps();
      }
      transpose16(v);  // v[l]: element c + l of the 16 rows
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l) _mm512_store_ps(panel + (l * steps + c / 16) * kNR + r0, v[l]);
    }
  }
}

// MR rows of x times a float panel. Lane l of every output runs over the t with 16 t + l < k;
// a lane that stops one step short takes the order's 0·0 there (+ 0). The lanes wait in
// `lanes` [16][MR][32] until the tree adds them.
template <int MR>
void tile_float(const float* x, int64_t x_stride, const float* panel, int64_t k, const PanelOut& o, float* lanes) {
  const int64_t steps = panel_steps(k);
  for (int64_t l = 0; l < 16; ++l) {
    const int64_t lane_steps = k > l ? (k - l + 15) / 16 : 0;
    const float* p = panel + l * steps * kNR;
    __m512 acc0[MR], acc1[MR];
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc0[r] = _mm512_setzero_ps(), acc1[r] = _mm512_setzero_ps();
    for (int64_t t = 0; t < lane_steps; ++t) {
      const __m512 w0 = _mm512_load_ps(p + t * kNR), w1 = _mm512_load_ps(p + t * kNR + 16);
      #pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 xv = _mm512_set1_ps(x[r * x_stride + 16 * t + l]);
        acc0[r] = _mm512_fmadd_ps(xv, w0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(xv, w1, acc1[r]);
      }
    }
    if (lane_steps < steps) {
      #pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        acc0[r] = _mm512_add_ps(acc0[r], _mm512_setzero_ps());
        acc1[r] = _mm512_add_ps(acc1[r], _mm512_setzero_ps());
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      _mm512_store_ps(lanes + (l * MR + r) * kNR, acc0[r]);
      _mm512_store_ps(lanes + (l * MR + r) * kNR + 16, acc1[r]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    __m512 out[2];
    for (int h = 0; h < 2; ++h) {
      __m512 t[16];
      #pragma GCC unroll 16
      for (int l = 0; l < 16; ++l) t[l] = _mm512_load_ps(lanes + (l * MR + r) * kNR + 16 * h);
      #pragma GCC unroll 16
      for (int l = 0; l < 8; ++l) t[l] = _mm512_add_ps(t[l], t[l + 8]);
      #pragma GCC unroll 16
      for (int l = 0; l < 4; ++l) t[l] = _mm512_add_ps(t[l], t[l + 4]);
      out[h] = _mm512_add_ps(_mm512_add_ps(t[0], t[2]), _mm512_add_ps(t[1], t[3]));
    }
    store_acc(o, r, out[0], out[1]);
  }
}

template <DType DT>
void gemm_float(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& cache) {
  const int64_t k = a.w.k;
  auto* panel = static_cast<float*>(cache.buf.get(static_cast<size_t>(16 * panel_steps(k) * kNR) * 4));
  if (cache.j0 != j0) pack_float<DT>(a.w, j0, j1 - j0, panel);
  cache.j0 = j0;
  alignas(64) float lanes[16 * kMRFloat * kNR];
  for_row_tiles<kMRFloat>(i0, i1, [&](auto mr, int64_t i) {
    PanelOut o = panel_out(a, i, j0, j1);
    tile_float<decltype(mr)::value>(a.x + i * a.x_stride, a.x_stride, panel, k, o, lanes);
  });
}

// k-quant panel, per 32-weight chunk b: the quants in vpdpbusd order [8 groups][32 columns][4]
// (q4_k/q5_k unsigned, q6_k as q - 32), then five vectors of 32 columns:
//   q4_k, q5_k: corr = -128 · (sum of the chunk's quants), dsc, -dmn (f32), unused, unused
//   q6_k:       corr of weights 0..15, corr of 16..31, sc of each half (i32), d (f32)
// so that a tile computes each chunk's integers and scales exactly as the stream does.
constexpr int64_t kKPanelBlock = kQPanelWeights + 5 * kNR * 4;

template <DType DT>
void pack_kquant(const WeightView& w, int64_t j0, int64_t nj, uint8_t* panel) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t rb = row_bytes(w), nsb = w.k / kKQuantElems;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t r0 = 0; r0 < kNR; r0 += 16) {
    const int64_t rows = std::clamp<int64_t>(nj - r0, 0, 16);
    for (int64_t sb = 0; sb < nsb; ++sb) {
      alignas(64) float scale[16][16] = {};  // q4_k/q5_k: kquant_scales per row
      alignas(64) int32_t sc[16][16] = {};   // q6_k: the 16 scales per row
      alignas(64) float d6[16] = {};
      for (int t = 0; t < rows; ++t) {
        const uint8_t* blk = base + (j0 + r0 + t) * rb + sb * kKBytes<DT>;
        if constexpr (DT == DType::kQ6_K) {
          _mm512_store_si512(sc[t], _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192))));
          d6[t] = f16_scale(blk + 208);
        } else {
          _mm512_store_ps(scale[t], kquant_scales(blk));
        }
      }
      [&]<int... C>(std::integer_sequence<int, C...>) {
        ([&] {
          uint8_t* pb = panel + (sb * kKQuantChunks + C) * kKPanelBlock;
          __m512 v[16];
#pragma GCC unroll 16
          for (int t = 0; t < 16; ++t) {
            if (t < rows) {
              const uint8_t* blk = base + (j0 + r0 + t) * rb + sb * kKBytes<DT>;
              __m256i q = kquant_quants<DT, C>(blk, kquant_high_bits<DT, C>(blk));
              if constexpr (DT == DType::kQ6_K) q = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
              v[t] = _mm512_castsi512_ps(_mm512_zextsi256_si512(q));
            } else {
              v[t] = _mm512_setzero_ps();
            }
          }
          transpose16(v);
          __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 16
          for (int g = 0; g < 8; ++g) {
            const __m512i wg = _mm512_castps_si512(v[g]);
            _mm512_store_si512(pb + (g * kNR + r0) * 4, wg);
            sum[g / 4] = _mm512_dpbusd_epi32(sum[g / 4], ones, wg);
          }
          uint8_t* tail = pb + kQPanelWeights + r0 * 4;
          const __m512i m128 = _mm512_set1_epi32(-128);
          if constexpr (DT == DType::kQ6_K) {
            alignas(64) int32_t s0[16], s1[16];
            for (int t = 0; t < 16; ++t) s0[t] = sc[t][2 * C % 8 + 8 * (C / 4)], s1[t] = sc[t][2 * C % 8 + 8 * (C / 4) + 1];
            _mm512_store_si512(tail, _mm512_mullo_epi32(sum[0], m128));
            _mm512_store_si512(tail + kNR * 4, _mm512_mullo_epi32(sum[1], m128));
            _mm512_store_si512(tail + 2 * kNR * 4, _mm512_load_si512(s0));
            _mm512_store_si512(tail + 3 * kNR * 4, _mm512_load_si512(s1));
            _mm512_store_ps(tail + 4 * kNR * 4, _mm512_load_ps(d6));
          } else {
            alignas(64) float f0[16], f1[16];
            for (int t = 0; t < 16; ++t) f0[t] = scale[t][C], f1[t] = scale[t][8 + C];
            _mm512_store_si512(tail, _mm512_mullo_epi32(_mm512_add_epi32(sum[0], sum[1]), m128));
            _mm512_store_ps(tail + kNR * 4, _mm512_load_ps(f0));
            _mm512_store_ps(tail + 2 * kNR * 4, _mm512_load_ps(f1));
          }
        }(), ...);
      }(std::make_integer_sequence<int, kKQuantChunks>{});
    }
  }
}

// MR rows of x (QuantForm::kUnsigned) times a k-quant panel, in the order of linear_impl.h.
template <DType DT, int MR>
void tile_kquant(const uint8_t* xu, const float* dx, const int32_t* xsum, int64_t k, const uint8_t* panel,
                 const PanelOut& o) {
  const int64_t nb = k / kQBlock;
  constexpr int kHalves = DT == DType::kQ6_K ? 2 : 1;  // integer sums kept per half chunk
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc0[r] = _mm512_setzero_ps(), acc1[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = panel + b * kKPanelBlock;
    const uint8_t* tail = pb + kQPanelWeights;
    __m512i s0[kHalves][MR], s1[kHalves][MR];
#pragma GCC unroll 16
    for (int h = 0; h < kHalves; ++h) {
      const __m512i c0 = _mm512_load_si512(tail + h * kNR * 4), c1 = _mm512_load_si512(tail + h * kNR * 4 + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) s0[h][r] = c0, s1[h][r] = c1;
    }
#pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      constexpr int kSplit = kHalves == 2 ? 4 : 8;
      const int h = g / kSplit;
      const __m512i w0 = _mm512_load_si512(pb + g * kNR * 4), w1 = _mm512_load_si512(pb + g * kNR * 4 + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i xv = _mm512_set1_epi32(load_i32(xu + r * k + b * kQBlock + 4 * g));
        s0[h][r] = _mm512_dpbusd_epi32(s0[h][r], xv, w0);
        s1[h][r] = _mm512_dpbusd_epi32(s1[h][r], xv, w1);
      }
    }
    if constexpr (DT == DType::kQ6_K) {
      const __m512i a0 = _mm512_load_si512(tail + 2 * kNR * 4), a1 = _mm512_load_si512(tail + 2 * kNR * 4 + 64);
      const __m512i b0 = _mm512_load_si512(tail + 3 * kNR * 4), b1 = _mm512_load_si512(tail + 3 * kNR * 4 + 64);
      const __m512 d0 = _mm512_load_ps(tail + 4 * kNR * 4), d1 = _mm512_load_ps(tail + 4 * kNR * 4 + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i t0 = _mm512_add_epi32(_mm512_mullo_epi32(s0[0][r], a0), _mm512_mullo_epi32(s0[1][r], b0));
        const __m512i t1 = _mm512_add_epi32(_mm512_mullo_epi32(s1[0][r], a1), _mm512_mullo_epi32(s1[1][r], b1));
        const __m512 d = _mm512_set1_ps(dx[r * nb + b]);
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t0), _mm512_mul_ps(d0, d), acc0[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t1), _mm512_mul_ps(d1, d), acc1[r]);
      }
    } else {
      const __m512 sc0 = _mm512_load_ps(tail + kNR * 4), sc1 = _mm512_load_ps(tail + kNR * 4 + 64);
      const __m512 mn0 = _mm512_load_ps(tail + 2 * kNR * 4), mn1 = _mm512_load_ps(tail + 2 * kNR * 4 + 64);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const float dxr = dx[r * nb + b];
        const __m512 d = _mm512_set1_ps(dxr);
        const __m512 t = _mm512_set1_ps(static_cast<float>(xsum[r * nb + b]) * dxr);
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0[0][r]), _mm512_mul_ps(sc0, d), acc0[r]);
        acc1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[0][r]), _mm512_mul_ps(sc1, d), acc1[r]);
        acc0[r] = _mm512_fmadd_ps(mn0, t, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(mn1, t, acc1[r]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) store_acc(o, r, acc0[r], acc1[r]);
}

// q8_0/q4_0 and the k-quants: a panel packed ahead or packed here once per panel, then tiles.
template <DType DT>
void gemm_quant(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& cache) {
  const int64_t k = a.w.k, nb = k / kQBlock;
  const uint8_t* panel = cache.packed != nullptr ? cache.packed + (j0 / kNR) * cache.packed_panel_bytes : nullptr;
  if (panel == nullptr) {
    auto* own = static_cast<uint8_t*>(cache.buf.get(static_cast<size_t>(nb * (kKQuant<DT> ? kKPanelBlock : kQPanelBlock))));
    if (cache.j0 != j0) {
      if constexpr (kKQuant<DT>) {
        pack_kquant<DT>(a.w, j0, j1 - j0, own);
      } else {
        pack_quant<DT>(a.w, j0, j1 - j0, own);
      }
    }
    cache.j0 = j0;
    panel = own;
  }
  const auto* xu = reinterpret_cast<const uint8_t*>(a.xq.q);
  for_row_tiles<kMRQuant>(i0, i1, [&](auto mr, int64_t i) {
    PanelOut o = panel_out(a, i, j0, j1);
    constexpr int kMR = decltype(mr)::value;
    if constexpr (kKQuant<DT>) {
      tile_kquant<DT, kMR>(xu + i * k, a.xq.d + i * nb, a.xq.sums ? a.xq.sums + i * nb : nullptr, k, panel, o);
    } else {
      tile_quant<kMR>(xu + i * k, a.xq.d + i * nb, k, panel, o);
    }
  });
}

void gemm(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& cache) {
  switch (a.w.dtype) {
    case DType::kF32: return gemm_float<DType::kF32>(a, i0, i1, j0, j1, cache);
    case DType::kF16: return gemm_float<DType::kF16>(a, i0, i1, j0, j1, cache);
    case DType::kBF16: return gemm_float<DType::kBF16>(a, i0, i1, j0, j1, cache);
    case DType::kQ8_0: return gemm_quant<DType::kQ8_0>(a, i0, i1, j0, j1, cache);
    case DType::kQ4_0: return gemm_quant<DType::kQ4_0>(a, i0, i1, j0, j1, cache);
    case DType::kQ4_K: return gemm_quant<DType::kQ4_K>(a, i0, i1, j0, j1, cache);
    case DType::kQ5_K: return gemm_quant<DType::kQ5_K>(a, i0, i1, j0, j1, cache);
    case DType::kQ6_K: return gemm_quant<DType::kQ6_K>(a, i0, i1, j0, j1, cache);
    default: return;
  }
}

// Quantized weights only: a float panel holds f32, twice an f16 matrix's bytes.
int64_t panel_bytes(const WeightView& w) {
  if (is_kquant(w.dtype)) return w.k / kQBlock * kKPanelBlock;
  return is_block_quant(w.dtype) ? w.k / kQBlock * kQPanelBlock : 0;
}

void pack(const WeightView& w, int64_t j0, int64_t j1, void* panel) {
  if (w.dtype == DType::kQ8_0) pack_quant<DType::kQ8_0>(w, j0, j1 - j0, static_cast<uint8_t*>(panel));
  if (w.dtype == DType::kQ4_0) pack_quant<DType::kQ4_0>(w, j0, j1 - j0, static_cast<uint8_t*>(panel));
  if (w.dtype == DType::kQ4_K) pack_kquant<DType::kQ4_K>(w, j0, j1 - j0, static_cast<uint8_t*>(panel));
  if (w.dtype == DType::kQ5_K) pack_kquant<DType::kQ5_K>(w, j0, j1 - j0, static_cast<uint8_t*>(panel));
  if (w.dtype == DType::kQ6_K) pack_kquant<DType::kQ6_K>(w, j0, j1 - j0, static_cast<uint8_t*>(panel));
}

}  // namespace

const Kernels& avx512_kernels() {
  // Crossovers, one thread, 768x768 (us, stream vs gemm): f16 m=16 127 vs 170, m=32 258 vs
  // 276; q8_0 m=3 35 vs 41, m=4 44 vs 40; q4_0 m=3 38 vs 40, m=4 51 vs 41. Quantized weights
  // stream up to m=4 all the same: one pass serves kMaxMX = 4 rows, and a wide weight packs
  // for long (two threads, q8_0 32000x768, m=4: stream 1.3 ms, gemm 9.7 ms); a wide one up
  // to m=16 (m=16: stream 5.7 ms, gemm 7.7 ms).
  static const Kernels k{"avx512", kNR, 16, kMaxMX, 16, quant_form, quantize, stream, gemm, panel_bytes, pack};
  return k;
}

}  // namespace kvf::exec::cpu::detail
