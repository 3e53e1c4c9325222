// The AVX-512 body of the CPU attention kernel: one RowTask (query rows of one kv head
// against a key range) as blocks of kKeyBlock keys, each block scores -> online softmax
// -> weights · V. Built with AVX-512 flags only; attention.cpp calls it when the CPU has them.

#include <algorithm>
#include <cmath>
#include <limits>

#include "exec/cpu/attention_rows.h"
#include "exec/cpu/vector_math_avx512.h"

namespace kvf::exec::cpu::attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// A block's scores are dot products straight from the key rows, for any number of rows:
// a score's sum then runs in one order (16 lanes over the width, then sum_each16) whether
// its row is decoded alone or prefilled among 64, so a token's attention does not depend
// on the step that computes it. (Transposing the block for broadcast FMAs was faster from
// ~32 rows, ~125 against ~100 GFLOP/s at 64, but sums in another order.)

// ---- vector helpers

// The first n lanes (n clamped into [0, 16]).
inline __mmask16 lanes_below(int64_t n) {
  if (n <= 0) return 0;
  if (n >= kLanes) return 0xFFFF;
  return static_cast<__mmask16>((1u << n) - 1);
}

// 16 f32 or f16 elements as f32; masked lanes read nothing and give 0.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

// Lane j of the result is the sum of the 16 lanes of v[j]: a transpose folded into the adds
// (45 shuffles and adds for 16 sums instead of 16 separate horizontal reductions).
inline __m512 sum_each16(const __m512* v) {
  __m512 w[8];  // per 128-bit lane: halves of the lane sums of v[2i], v[2i+1]
  #pragma GCC unroll 16
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 x[4];  // per 128-bit lane L: the lane-L sums of v[4i .. 4i + 3]
  #pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    const __m512d c = _mm512_castps_pd(w[2 * i]), d = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  const __m512 z01 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 z23 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z01, z23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(z01, z23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// ---- where a block's keys are

// The K and V rows of the keys [key, key + n) of one block, as row j = 0..n-1. Dense keys
// are consecutive rows of the task's [Lk, d] slices, plain arithmetic as ever. Paged keys
// are pool rows read[key + j], looked up once per block: every row is read again by each
// register tile of the scores and of weights · V.
template <class T, bool Paged>
struct BlockRows;

template <class T>
struct BlockRows<T, false> {
  const T* k;
  const T* ks;  // the split key's shared part, or null
  const T* v;
  int64_t k_stride, ds, v_stride;
  BlockRows(const RowTask& t, int64_t key, int64_t)
      : k(static_cast<const T*>(t.k) + key * t.k_stride),
        ks(t.ks ? static_cast<const T*>(t.ks) + key * t.ds : nullptr),
        v(static_cast<const T*>(t.v) + key * t.v_stride),
        k_stride(t.k_stride),
        ds(t.ds),
        v_stride(t.v_stride) {}
  const T* krow(int64_t j) const { return k + j * k_stride; }
  const T* ksrow(int64_t j) const { return ks + j * ds; }
  const T* vrow(int64_t j) const { return v + j * v_stride; }
};

template <class T>
struct BlockRows<T, true> {
  const T* k[kKeyBlock];
  const T* ks[kKeyBlock];  // the shared pool [S, 1, ds] has one row per slot
  const T* v[kKeyBlock];
  BlockRows(const RowTask& t, int64_t key, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t row = t.read[key + j];
      k[j] = static_cast<const T*>(t.k) + row * t.k_stride;
      ks[j] = t.ks ? static_cast<const T*>(t.ks) + row * t.ds : nullptr;
      v[j] = static_cast<const T*>(t.v) + row * t.v_stride;
    }
  }
  const T* krow(int64_t j) const { return k[j]; }
  const T* ksrow(int64_t j) const { return ks[j]; }
  const T* vrow(int64_t j) const { return v[j]; }
};

// ---- prefetch

// How far ahead of use the K and V rows are requested, into L2, while the scores run.
// Measured on the Zen 4 decode (16k keys, d 128, one thread, CPU time, best of a few runs):
// no prefetch 41% of the read bandwidth, 4 to 8 KiB ahead 87%, 16 to 32 KiB ahead 75%;
// requesting the next block's values during weights · V instead was no better.
constexpr int64_t kPrefetchBytes = 8192;

int64_t prefetch_keys_ahead(const RowTask& t) {
  const int64_t key_bytes = (t.dk + t.ds + t.dv) * (t.f16 ? 2 : 4);
  return std::clamp<int64_t>(kPrefetchBytes / key_bytes, 2, kKeyBlock);
}

// Both helpers are always inlined: as calls, GCC 12's mod/ref analysis finds them free of
// side effects and deletes them, prefetches and all.
template <class T>
[[gnu::always_inline]] inline void prefetch_row(const T* p, int64_t elems) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (int64_t off = 0; off < elems * int64_t(sizeof(T)); off += 64) _mm_prefetch(bytes + off, _MM_HINT_T1);
}

// Requests the K, shared K and V rows of a later key; a paged key's rows are found through
// the read map. The hardware prefetchers stop at every 4 KiB page (eight f32 key rows of
// 128) and cannot follow a map at all, so without this a decode step waits on memory
// instead of overlapping it with the arithmetic.
template <class T, bool Paged>
[[gnu::always_inline]] inline void prefetch_key(const RowTask& t, int64_t key) {
  if (key >= t.t_end) return;
  const int64_t row = Paged ? int64_t(t.read[key]) : key;
  prefetch_row(static_cast<const T*>(t.k) + row * t.k_stride, t.dk);
  if (t.ks) prefetch_row(static_cast<const T*>(t.ks) + row * t.ds, t.ds);
  prefetch_row(static_cast<const T*>(t.v) + row * t.v_stride, t.dv);
}

// ---- scores, few rows: dot products straight from the key rows

// a[g] += q[g][q_off + c] * k[c] lane-wise over c < d (q rows are zero padded).
template <class T, int G>
inline void dot_accumulate(const T* k, int64_t d, const float* const* q, int64_t q_off, __m512* a) {
  int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) {
    const __m512 kv = load16(k + c);
    #pragma GCC unroll 16
    for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q[g] + q_off + c), a[g]);
  }
  if (c < d) {
    const __m512 kv = load16(k + c, lanes_below(d - c));
    #pragma GCC unroll 16
    for (int g = 0; g < G; ++g) a[g] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q[g] + q_off + c), a[g]);
  }
}

// Raw scores q · key of rows [r0, r0 + G) for the block's keys [key, key + n).
template <class T, int G, bool Paged>
void dot_scores(const RowTask& t, const BlockRows<T, Paged>& rows, int64_t r0, int64_t key, int64_t n) {
  const float* q[G];
  for (int g = 0; g < G; ++g) q[g] = t.q + (r0 + g) * t.q_stride;
  const int64_t ahead = r0 == 0 ? prefetch_keys_ahead(t) : 0;  // the first row group asks
  for (int64_t j0 = 0; j0 < n; j0 += kLanes) {
    __m512 acc[G][kLanes];
    #pragma GCC unroll 16
    for (int64_t jj = 0; jj < kLanes; ++jj) {
      __m512 a[G];
      #pragma GCC unroll 16
      for (int g = 0; g < G; ++g) a[g] = _mm512_setzero_ps();
      if (j0 + jj < n) {
        if (ahead) prefetch_key<T, Paged>(t, key + j0 + jj + ahead);
        dot_accumulate<T, G>(rows.krow(j0 + jj), t.dk, q, 0, a);
        if (t.ks) dot_accumulate<T, G>(rows.ksrow(j0 + jj), t.ds, q, t.ks_offset, a);
      }
      #pragma GCC unroll 16
      for (int g = 0; g < G; ++g) acc[g][jj] = a[g];
    }
    #pragma GCC unroll 16
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(t.s + (r0 + g) * kKeyBlock + j0, sum_each16(acc[g]));
  }
}

template <class T, bool Paged>
void block_scores(const RowTask& t, const BlockRows<T, Paged>& rows, int64_t key, int64_t n) {
  int64_t r = 0;
  for (; r + 4 <= t.rows; r += 4) dot_scores<T, 4>(t, rows, r, key, n);
  if (t.rows - r >= 2) dot_scores<T, 2>(t, rows, r, key, n), r += 2;
  if (r < t.rows) dot_scores<T, 1>(t, rows, r, key, n);
}

// ---- online softmax

// True when the mask hides every key of the block from every row: the block would add
// exactly zero, so it is skipped (the upper triangle of a causal prefill).
bool block_hidden(const RowTask& t, int64_t key, int64_t n) {
  if (!t.mask) return false;
  const __m512 neg_inf = _mm512_set1_ps(kNegInf);
  for (int64_t r = 0; r < t.rows; ++r) {
    for (int64_t h = 0; h < kKeyBlock; h += kLanes) {
      const __mmask16 valid = lanes_below(n - h);
      const __m512 m = _mm512_maskz_loadu_ps(valid, t.mask[r] + key + h);
      if (_mm512_mask_cmp_ps_mask(valid, m, neg_inf, _CMP_NEQ_UQ)) return false;
    }
  }
  return true;
}

// Turns row r's raw block scores into weights exp(s - m_new), updates (m, l) and returns
// the factor exp(m_old - m_new) that rescales the row's earlier o. A row that has seen only
// -inf keeps (0, -inf, 0): weights and factor are exp(-inf - 0) = 0.
float softmax_row(const RowTask& t, int64_t r, int64_t key, int64_t n) {
  float* s = t.s + r * kKeyBlock;
  __m512 x[2];
  #pragma GCC unroll 16
  for (int h = 0; h < 2; ++h) {
    const __mmask16 valid = lanes_below(n - h * kLanes);
    __m512 v = _mm512_maskz_loadu_ps(valid, s + h * kLanes);
    if (t.softcap != 0.0f) v = _mm512_mul_ps(_mm512_set1_ps(t.softcap), tanh_ps(v));
    if (t.mask) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(valid, t.mask[r] + key + h * kLanes));
    x[h] = _mm512_mask_blend_ps(valid, _mm512_set1_ps(kNegInf), v);
  }
  const float block_max = _mm512_reduce_max_ps(_mm512_max_ps(x[0], x[1]));
  const float m_new = std::max(t.m[r], block_max);
  const float m_use = m_new == kNegInf ? 0.0f : m_new;
  const float alpha = std::exp(t.m[r] - m_use);
  const __m512 mu = _mm512_set1_ps(m_use);
  const __m512 p0 = exp_ps(_mm512_sub_ps(x[0], mu)), p1 = exp_ps(_mm512_sub_ps(x[1], mu));
  _mm512_storeu_ps(s, p0);
  _mm512_storeu_ps(s + kLanes, p1);
  t.l[r] = t.l[r] * alpha + _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
  t.m[r] = m_new;
  return alpha;
}

// ---- weights · V

// o[r0 + r, c0 + 16 c] = alpha[r] * o + sum_j p[r, j] v[j, c0 + 16 c] on an RT x CT
// register tile; v is read once per tile for all its rows.
template <class T, int RT, int CT, bool Paged>
void pv_tile(const RowTask& t, const BlockRows<T, Paged>& rows, int64_t n, int64_t r0, int64_t c0, const float* alpha) {
  __mmask16 cm[CT];
  #pragma GCC unroll 16
  for (int c = 0; c < CT; ++c) cm[c] = lanes_below(t.dv - c0 - c * kLanes);
  __m512 acc[RT][CT];
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r0 + r]);
    #pragma GCC unroll 16
    for (int c = 0; c < CT; ++c)
      acc[r][c] = _mm512_mul_ps(_mm512_load_ps(t.o + (r0 + r) * t.o_stride + c0 + c * kLanes), a);
  }
  for (int64_t j = 0; j < n; ++j) {
    __m512 vv[CT];
    #pragma GCC unroll 16
    for (int c = 0; c < CT; ++c) vv[c] = load16(rows.vrow(j) + c0 + c * kLanes, cm[c]);
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) {
      const __m512 p = _mm512_set1_ps(t.s[(r0 + r) * kKeyBlock + j]);
      #pragma GCC unroll 16
      for (int c = 0; c < CT; ++c) acc[r][c] = _mm512_fmadd_ps(p, vv[c], acc[r][c]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < RT; ++r)
    #pragma GCC unroll 16
    for (int c = 0; c < CT; ++c) _mm512_store_ps(t.o + (r0 + r) * t.o_stride + c0 + c * kLanes, acc[r][c]);
}

template <class T, int RT, bool Paged>
void pv_rows(const RowTask& t, const BlockRows<T, Paged>& rows, int64_t n, int64_t r0, const float* alpha) {
  const int64_t vecs = pad_lanes(t.dv) / kLanes;
  int64_t c = 0;
  for (; c + 4 <= vecs; c += 4) pv_tile<T, RT, 4>(t, rows, n, r0, c * kLanes, alpha);
  if (vecs - c >= 2) pv_tile<T, RT, 2>(t, rows, n, r0, c * kLanes, alpha), c += 2;
  if (c < vecs) pv_tile<T, RT, 1>(t, rows, n, r0, c * kLanes, alpha);
}

template <class T, bool Paged>
void pv_block(const RowTask& t, const BlockRows<T, Paged>& rows, int64_t n, const float* alpha) {
  int64_t r = 0;
  for (; r + 4 <= t.rows; r += 4) pv_rows<T, 4>(t, rows, n, r, alpha);
  if (t.rows - r >= 2) pv_rows<T, 2>(t, rows, n, r, alpha), r += 2;
  if (r < t.rows) pv_rows<T, 1>(t, rows, n, r, alpha);
}

template <class T, bool Paged>
void run_rows(const RowTask& t) {
  for (int64_t r = 0; r < t.rows; ++r) {
    t.m[r] = kNegInf;
    t.l[r] = 0.0f;
    std::fill(t.o + r * t.o_stride, t.o + (r + 1) * t.o_stride, 0.0f);
  }
  float alpha[kMaxRows];
  for (int64_t key = t.t_begin; key < t.t_end; key += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, t.t_end - key);
    if (block_hidden(t, key, n)) continue;
    const BlockRows<T, Paged> rows(t, key, n);
    block_scores<T, Paged>(t, rows, key, n);
    for (int64_t r = 0; r < t.rows; ++r) alpha[r] = softmax_row(t, r, key, n);
    pv_block<T, Paged>(t, rows, n, alpha);
  }
}

}  // namespace

void run_rows_avx512(const RowTask& t) {
  if (t.read) {
    if (t.f16)
      run_rows<uint16_t, true>(t);
    else
      run_rows<float, true>(t);
  } else if (t.f16) {
    run_rows<uint16_t, false>(t);
  } else {
    run_rows<float, false>(t);
  }
}

}  // namespace kvf::exec::cpu::attn
