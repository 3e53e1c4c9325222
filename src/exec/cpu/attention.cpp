// The fused CPU attention kernel: checks, the cut into tasks (batch row, kv head, tile of
// query rows[, key split]), the split-KV combine, and the portable body in plain loops.
// The fast body is attention_avx512.cpp; the oracle's decomposition (eval/) is the truth.
#include "exec/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "exec/cpu/attention_rows.h"

namespace kvf::exec::cpu {
namespace {

using attn::kKeyBlock;
using attn::kMaxRows;
using attn::RowTask;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- the cut into tasks

// How the n_rep * Lq query rows of one kv head are tiled. Row r is query row r / n_rep of
// head g * n_rep + r % n_rep, so a tile holds every head of the group: each K/V row it loads
// serves all of them.
struct Geometry {
  int64_t n_rep = 1;
  int64_t rows = 1;       // query rows per kv head: n_rep * Lq
  int64_t tile_rows = 1;  // rows per task (the last tile may hold fewer)
  int64_t tiles = 1;
  int64_t q_stride = 0, ks_offset = 0, o_stride = 0;  // padded widths of the q and o tiles
};

Geometry geometry_of(const AttentionArgs& a) {
  Geometry g;
  g.n_rep = a.hq / a.hkv;
  g.rows = g.n_rep * a.lq;
  g.ks_offset = attn::pad_lanes(a.dk);
  g.q_stride = g.ks_offset + attn::pad_lanes(a.ds);
  g.o_stride = attn::pad_lanes(a.dv);
  const int64_t max_rows = std::min(kMaxRows, attn::kTileFloats / std::max(g.q_stride, g.o_stride));
  g.tiles = (g.rows + max_rows - 1) / max_rows;
  g.tile_rows = (g.rows + g.tiles - 1) / g.tiles;  // balanced tiles
  return g;
}

int64_t live_length(const AttentionArgs& a, int64_t b) {
  if (!a.len) return a.lk;
  return std::clamp<int64_t>(a.len[b], 0, a.lk);
}

// The unnormalized online-softmax state of a tile's rows: o [rows, o_stride], m, l.
struct RowsState {
  alignas(64) float o[attn::kTileFloats];
  float m[kMaxRows], l[kMaxRows];
};

// One task's inputs and state, about 250 KiB: on the stack, so a call allocates nothing.
struct Workspace {
  alignas(64) float q[attn::kTileFloats];
  alignas(64) float s[kMaxRows * kKeyBlock];
  alignas(64) float kt[attn::kPackFloats];
  const float* mask[kMaxRows];
  RowsState piece;   // what the body leaves for one piece
  RowsState folded;  // the pieces folded so far, when a task's keys span more than one
};

// (O, M, L) + (o, m, l), the fold of attention.h. A piece that saw no key (m = -inf) adds
// nothing; the first one that did is taken as it is (O e^-inf = 0).
void fold_piece(float* fo, float& fm, float& fl, const float* o, float m, float l, int64_t dv) {
  if (m == kNegInf) return;
  const float m_new = std::max(fm, m);
  const float a = std::exp(fm - m_new), b = std::exp(m - m_new);
  for (int64_t c = 0; c < dv; ++c) fo[c] = std::fma(o[c], b, fo[c] * a);
  fl = std::fma(l, b, fl * a);
  fm = m_new;
}

// out = o / l. l is 0 only for a row that saw no key (a key seen adds e^0 = 1 at its
// max): that row is zeros, not 0/0; a NaN l stays NaN.
void normalize(const float* o, float l, int64_t dv, float* out) {
  if (l == 0.0f) {
    std::fill(out, out + dv, 0.0f);
    return;
  }
  for (int64_t c = 0; c < dv; ++c) out[c] = o[c] / l;
}

// Where a task's rows go: the normalized output, or the split's slot of the partials
// [B, Hq, Lq, splits, dv + 2] (o[dv], m, l).
struct Sink {
  float* partials = nullptr;  // null: the final output
  int64_t splits = 1, split = 0;
};

using RowsFn = void (*)(const RowTask&);

// Copies the tile's query rows into ws.q with the scale folded in (and 1 / softcap, since
// softcap * tanh(x * scale / softcap) is what the body computes from q · k).
void load_queries(const AttentionArgs& a, const Geometry& geo, int64_t b, int64_t g, int64_t r0,
                  int64_t rows, Workspace& ws) {
  const float qscale = a.softcap != 0.0f ? a.scale / a.softcap : a.scale;
  const int64_t dq = a.dk + a.ds;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = (r0 + r) / geo.n_rep, h = g * geo.n_rep + (r0 + r) % geo.n_rep;
    const float* src = a.q + ((b * a.hq + h) * a.lq + i) * dq;
    float* dst = ws.q + r * geo.q_stride;
    std::fill(dst, dst + geo.q_stride, 0.0f);
    for (int64_t c = 0; c < a.dk; ++c) dst[c] = src[c] * qscale;
    for (int64_t c = 0; c < a.ds; ++c) dst[geo.ks_offset + c] = src[a.dk + c] * qscale;
    if (a.mask) {
      const int64_t mb = a.mask_batch == 1 ? 0 : b, mh = a.mask_heads == 1 ? 0 : h;
      ws.mask[r] = a.mask + ((mb * a.mask_heads + mh) * a.lq + i) * a.lk;
    }
  }
}

void store_rows(const AttentionArgs& a, const Geometry& geo, int64_t b, int64_t g, int64_t r0,
                int64_t rows, const RowsState& st, const Sink& sink) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = (r0 + r) / geo.n_rep, h = g * geo.n_rep + (r0 + r) % geo.n_rep;
    const int64_t row = (b * a.hq + h) * a.lq + i;
    const float* o = st.o + r * geo.o_stride;
    if (!sink.partials) {
      float* out = a.out + row * a.dv;
      normalize(o, st.l[r], a.dv, out);
      continue;
    }
    float* part = sink.partials + (row * sink.splits + sink.split) * (a.dv + 2);
    std::copy(o, o + a.dv, part);
    part[a.dv] = st.m[r];
    part[a.dv + 1] = st.l[r];
  }
}

void run_task(const AttentionArgs& a, const Geometry& geo, RowsFn body, int64_t b, int64_t g,
              int64_t tile, int64_t t_begin, int64_t t_end, const Sink& sink) {
  Workspace ws;
  const int64_t r0 = tile * geo.tile_rows, rows = std::min(geo.tile_rows, geo.rows - r0);
  load_queries(a, geo, b, g, r0, rows, ws);
  const size_t kv_bytes = a.kv_dtype == DType::kF16 ? 2 : 4;
  const auto* k = static_cast<const char*>(a.k);
  const auto* v = static_cast<const char*>(a.v);
  const auto* ks = static_cast<const char*>(a.k_shared);
  RowTask t;
  t.rows = rows;
  t.dk = a.dk;
  t.ds = a.ds;
  t.dv = a.dv;
  t.f16 = a.kv_dtype == DType::kF16;
  t.q = ws.q;
  t.q_stride = geo.q_stride;
  t.ks_offset = geo.ks_offset;
  if (a.read) {  // head g of pool row 0; key t at pool row read[b, t]
    t.k = k + g * a.dk * kv_bytes;
    t.ks = ks;  // the shared pool [pool_rows, 1, ds]: every head reads row read[b, t]
    t.v = v + g * a.dv * kv_bytes;
    t.read = a.read + b * a.lk;
    t.k_stride = a.hkv * a.dk;
    t.v_stride = a.hkv * a.dv;
  } else {
    t.k = k + (b * a.hkv + g) * a.lk * a.dk * kv_bytes;
    t.ks = ks ? ks + b * a.lk * a.ds * kv_bytes : nullptr;
    t.v = v + (b * a.hkv + g) * a.lk * a.dv * kv_bytes;
    t.k_stride = a.dk;
    t.v_stride = a.dv;
  }
  t.mask = a.mask ? ws.mask : nullptr;
  t.softcap = a.softcap;
  t.o = ws.piece.o;
  t.o_stride = geo.o_stride;
  t.m = ws.piece.m;
  t.l = ws.piece.l;
  t.s = ws.s;
  t.kt = ws.kt;
  t_end = std::max(t_begin, t_end);
  const int64_t piece = t_begin / kAttentionPiece;
  if (t_end <= (piece + 1) * kAttentionPiece) {  // one piece: its state is the answer
    t.t_begin = t_begin;
    t.t_end = t_end;
    body(t);
    store_rows(a, geo, b, g, r0, rows, ws.piece, sink);
    return;
  }
  RowsState& f = ws.folded;
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(f.o + r * geo.o_stride, f.o + r * geo.o_stride + a.dv, 0.0f);
    f.m[r] = kNegInf;
    f.l[r] = 0.0f;
  }
  for (int64_t p = piece; p * kAttentionPiece < t_end; ++p) {
    t.t_begin = std::max(t_begin, p * kAttentionPiece);
    t.t_end = std::min(t_end, (p + 1) * kAttentionPiece);
    body(t);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = r * geo.o_stride;
      fold_piece(f.o + at, f.m[r], f.l[r], ws.piece.o + at, ws.piece.m[r], ws.piece.l[r], a.dv);
    }
  }
  store_rows(a, geo, b, g, r0, rows, f, sink);
}

// The split partials of each row folded in key order, then out = O / L: the streaming
// schedule's answer to the bit. Every split neutral gives zeros, as a lane that saw nothing.
void combine_rows(const AttentionArgs& a, int64_t splits, const float* partials, int64_t begin,
                  int64_t end) {
  const int64_t width = a.dv + 2;
  for (int64_t row = begin; row < end; ++row) {
    const float* part = partials + row * splits * width;
    float* out = a.out + row * a.dv;
    std::fill(out, out + a.dv, 0.0f);
    float m = kNegInf, l = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      const float* o = part + s * width;
      fold_piece(out, m, l, o, o[a.dv], o[a.dv + 1], a.dv);
    }
    normalize(out, l, a.dv, out);
  }
}

// ---- the portable body: the same blocks as the fast bodies, in plain loops

inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t h) { return f16_bits_to_f32(h); }

// One online-softmax step of a row over its block scores s[0, n), which become weights.
// Returns the factor that rescales the row's earlier state.
float softmax_step(float* s, int64_t n, float& m, float& l) {
  float block_max = kNegInf;
  for (int64_t j = 0; j < n; ++j) block_max = std::max(block_max, s[j]);
  const float m_new = std::max(m, block_max);
  const float m_use = m_new == kNegInf ? 0.0f : m_new;  // nothing seen yet: every weight 0
  const float alpha = std::exp(m - m_use);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m_use);
    sum += s[j];
  }
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

// Key t's K and V rows: row t of the dense layout, or pool row read[t].
template <class T>
const T* key_row(const RowTask& t, int64_t key) {
  return static_cast<const T*>(t.k) + (t.read ? int64_t(t.read[key]) : key) * t.k_stride;
}
template <class T>
const T* shared_row(const RowTask& t, int64_t key) {  // one head: the pool [S, 1, ds] or [Lk, ds]
  return static_cast<const T*>(t.ks) + (t.read ? int64_t(t.read[key]) : key) * t.ds;
}
template <class T>
const T* value_row(const RowTask& t, int64_t key) {
  return static_cast<const T*>(t.v) + (t.read ? int64_t(t.read[key]) : key) * t.v_stride;
}

// The block's keys as f32 rows laid out like the q rows: [n, q_stride] in t.kt.
template <class T>
void unpack_keys(const RowTask& t, int64_t key, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float* row = t.kt + j * t.q_stride;
    std::fill(row, row + t.q_stride, 0.0f);
    const T* k = key_row<T>(t, key + j);
    for (int64_t c = 0; c < t.dk; ++c) row[c] = to_f32(k[c]);
    if (t.ds == 0) continue;
    const T* ks = shared_row<T>(t, key + j);
    for (int64_t c = 0; c < t.ds; ++c) row[t.ks_offset + c] = to_f32(ks[c]);
  }
}

void block_scores(const RowTask& t, int64_t key, int64_t n) {
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s = t.s + r * kKeyBlock;
    for (int64_t j = 0; j < n; ++j) {
      const float* q = t.q + r * t.q_stride;
      const float* k = t.kt + j * t.q_stride;
      float dot = 0.0f;
      for (int64_t c = 0; c < t.q_stride; ++c) dot += q[c] * k[c];
      s[j] = t.softcap != 0.0f ? t.softcap * std::tanh(dot) : dot;
      if (t.mask) s[j] += t.mask[r][key + j];
    }
  }
}

template <class T>
void run_rows_portable_t(const RowTask& t) {
  for (int64_t r = 0; r < t.rows; ++r) {
    t.m[r] = kNegInf;
    t.l[r] = 0.0f;
    std::fill(t.o + r * t.o_stride, t.o + (r + 1) * t.o_stride, 0.0f);
  }
  for (int64_t key = t.t_begin; key < t.t_end; key += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, t.t_end - key);
    unpack_keys<T>(t, key, n);
    block_scores(t, key, n);
    for (int64_t r = 0; r < t.rows; ++r) {
      float* p = t.s + r * kKeyBlock;
      const float alpha = softmax_step(p, n, t.m[r], t.l[r]);
      float* o = t.o + r * t.o_stride;
      for (int64_t c = 0; c < t.dv; ++c) o[c] *= alpha;
      for (int64_t j = 0; j < n; ++j) {
        const T* v = value_row<T>(t, key + j);
        for (int64_t c = 0; c < t.dv; ++c) o[c] += p[j] * to_f32(v[c]);
      }
    }
  }
}

void run_rows_portable(const RowTask& t) {
  if (t.f16)
    run_rows_portable_t<uint16_t>(t);
  else
    run_rows_portable_t<float>(t);
}

// ---- instruction sets

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

// The body that runs for a request: kAuto, or one this CPU lacks, gets the best it has.
AttentionIsa resolve(AttentionIsa isa) {
  if (isa != AttentionIsa::kAuto && attention_isa_supported(isa)) return isa;
  return attention_isa_supported(AttentionIsa::kAvx512) ? AttentionIsa::kAvx512 : AttentionIsa::kPortable;
}

RowsFn body_for(AttentionIsa isa) {
  return resolve(isa) == AttentionIsa::kAvx512 ? attn::run_rows_avx512 : run_rows_portable;
}

Status check_shapes(const AttentionArgs& a) {
  if (a.kv_dtype != DType::kF32 && a.kv_dtype != DType::kF16)
    return unsupported("attention: kv dtype ", dtype_name(a.kv_dtype), ", expected f32 or f16");
  if (a.batch < 1 || a.hq < 1 || a.hkv < 1 || a.lq < 1 || a.lk < 1 || a.dk < 1 || a.ds < 0 || a.dv < 1)
    return invalid_input("attention: batch, hq, hkv, lq, lk, dk, dv must be >= 1 and ds >= 0");
  if (a.hq % a.hkv != 0) return invalid_input("attention: hq ", a.hq, " is not a multiple of hkv ", a.hkv);
  if (a.dk + a.ds > kAttentionMaxWidth || a.dv > kAttentionMaxWidth)
    return unsupported("attention: key width ", a.dk + a.ds, " or value width ", a.dv, " over ",
                       kAttentionMaxWidth);
  if (!a.q || !a.k || !a.v || !a.out) return invalid_input("attention: q, k, v and out are required");
  if ((a.ds > 0) != (a.k_shared != nullptr))
    return invalid_input("attention: k_shared must be given exactly when ds > 0");
  if (a.read && a.pool_rows < 1)
    return invalid_input("attention: paged keys need a pool of >= 1 rows, got ", a.pool_rows);
  if (a.mask && (a.mask_batch != 1 && a.mask_batch != a.batch))
    return invalid_input("attention: mask_batch ", a.mask_batch, ", expected 1 or ", a.batch);
  if (a.mask && (a.mask_heads != 1 && a.mask_heads != a.hq))
    return invalid_input("attention: mask_heads ", a.mask_heads, ", expected 1 or ", a.hq);
  return Status();
}

}  // namespace

bool attention_isa_supported(AttentionIsa isa) {
  static const bool avx512 = cpu_has_avx512();
  switch (isa) {
    case AttentionIsa::kAuto:
    case AttentionIsa::kPortable:
      return true;
    case AttentionIsa::kAvx512:
      return avx512;
  }
  return false;
}

const char* attention_isa_name(AttentionIsa isa) {
  switch (resolve(isa)) {
    case AttentionIsa::kAvx512:
      return "avx512";
    default:
      return "portable";
  }
}

Status attention_check(const AttentionArgs& a, const AttentionSchedule& s) {
  if (Status st = check_shapes(a); !st.ok()) return st;
  if (s.kind == AttentionScheduleKind::kStreaming) return Status();
  const int64_t pieces = plan::cpu_attention_pieces(a.lk);
  if (s.chunk != kAttentionPiece || s.splits != pieces || pieces < 2)
    return invalid_input("attention: split-KV runs one task per piece of ", kAttentionPiece, " keys (", pieces,
                         " for Lk ", a.lk, ", at least 2), got ", s.splits, " x ", s.chunk);
  return Status();
}

size_t attention_scratch_floats(const AttentionArgs& a, const AttentionSchedule& s) {
  if (s.kind == AttentionScheduleKind::kStreaming) return 0;
  return static_cast<size_t>(a.batch * a.hq * a.lq * s.splits * (a.dv + 2));
}

void attention(ThreadPool& pool, const AttentionArgs& a, const AttentionSchedule& s, float* scratch) {
  attention(pool, a, s, scratch, AttentionIsa::kAuto);
}

void attention(ThreadPool& pool, const AttentionArgs& a, const AttentionSchedule& s, float* scratch,
               AttentionIsa isa) {
#ifndef NDEBUG
  if (Status st = attention_check(a, s); !st.ok()) {  // a planner bug: it should have refused
    std::fprintf(stderr, "attention: %s\n", st.error().to_string().c_str());
    std::abort();
  }
#endif
  const RowsFn body = body_for(isa);
  const Geometry geo = geometry_of(a);
  const int64_t heads = a.batch * a.hkv * geo.tiles;  // tasks of one key range
  if (s.kind == AttentionScheduleKind::kStreaming) {
    pool.parallel_for(heads, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t tile = task % geo.tiles, bg = task / geo.tiles;
        const int64_t b = bg / a.hkv;
        run_task(a, geo, body, b, bg % a.hkv, tile, 0, live_length(a, b), Sink{});
      }
    });
    return;
  }
  pool.parallel_for(heads * s.splits, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t split = task % s.splits, head = task / s.splits;
      const int64_t tile = head % geo.tiles, bg = head / geo.tiles;
      const int64_t b = bg / a.hkv;
      const int64_t t_begin = split * s.chunk;
      const int64_t t_end = std::min(t_begin + s.chunk, live_length(a, b));
      run_task(a, geo, body, b, bg % a.hkv, tile, t_begin, t_end, Sink{scratch, s.splits, split});
    }
  });
  pool.parallel_for(
      a.batch * a.hq * a.lq,
      [&](int64_t begin, int64_t end) { combine_rows(a, s.splits, scratch, begin, end); }, 16);
}

}  // namespace kvf::exec::cpu
