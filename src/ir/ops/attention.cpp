// Attention compositions: the seed's chain (attention_masked / attention_prefill) and the
// live-length form. No attention opcode: compile/ recognizes these chains.
#include <limits>

#include "ir/ops.h"

namespace kvf::ir::ops {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t group_size(V q, V k) {
  const int64_t hq = q.dim(1), hkv = k.dim(1);
  if (hkv <= 0 || hq % hkv != 0) {
    q.b->fail(invalid_input("attention: ", hq, " query heads are not a multiple of ", hkv, " kv heads"));
    return 1;
  }
  return hq / hkv;
}

// scale, optional softcap, optional additive mask: the score transform.
V transform_scores(V scores, V mask, const AttnOpts& opts) {
  V s = scores * opts.scale;
  if (opts.softcap > 0) s = softcap(s, opts.softcap);
  return mask.valid() ? s + mask : s;
}

// A cache may store fewer bits than the step computes in (an f16 KV cache under f32
// activations): new rows are rounded into the cache's dtype on the way in and widened back
// for the attention. Widening is exact, so compile/ lets the fused op read the cache as is.
V stored_as(V x, V cache) { return x.dtype() == cache.dtype() ? x : x.b->cast(x, cache.dtype()); }
V widened_as(V cache, V q) { return cache.dtype() == q.dtype() ? cache : cache.b->cast(cache, q.dtype()); }

// x_new [B, H, T, D] into cache at position `start` (i32 [1]), donating the cache.
V write_at(V x_new, V cache, V start) {
  Builder& b = *x_new.b;
  V written = b.dynamic_update_slice(cache, stored_as(x_new, cache), start, 2);
  b.donate(cache, written);
  return written;
}

// Writes k_new/v_new [B, H, T, D] into the caches at pos[0]; out is left for the caller.
CachedAttention write_caches(V k_new, V v_new, V k_cache, V v_cache, V pos) {
  V start = pos.b->slice_axis(pos, 0, 0, 1);
  CachedAttention r;
  r.k_cache = write_at(k_new, k_cache, start);
  r.v_cache = write_at(v_new, v_cache, start);
  return r;
}

// The step's last token sees keys 0..pos[T-1]; the mask orders the tokens inside the step.
V cached_len(V pos) {
  const int64_t t = pos.dim(0);
  return pos.b->slice_axis(pos, 0, t - 1, t) + pos.b->like(pos, 1.0);
}

// MLA's one key head: the latent c then the roped k_rot, concatenated on the feature axis.
// compile/ takes the concat apart again (split key), so the joined key is never built.
V latent_key(V c, V k_rot) { return c.b->concat({c, k_rot}, 3); }

}  // namespace

V write_cache(V x_new, V cache, V pos) { return write_at(x_new, cache, pos.b->slice_axis(pos, 0, 0, 1)); }

V write_pool(V x_new, V pool, V write) {
  Builder& b = *x_new.b;
  // [B, H, T, D] -> [B*T, H, D], the pool's row layout
  V rows = b.reshape(b.transpose(x_new, {0, 2, 1, 3}), {x_new.dim(0) * x_new.dim(2), x_new.dim(1), x_new.dim(3)});
  V written = b.scatter_update(pool, write, stored_as(rows, pool));
  b.donate(pool, written);
  return written;
}

V pool_view(V pool, V read) {
  Builder& b = *pool.b;
  return b.transpose(b.gather(pool, read), {0, 2, 1, 3});
}

V repeat_kv(V x, int64_t n_rep) {
  if (n_rep == 1) return x;
  Builder& b = *x.b;
  const int64_t batch = x.dim(0), hkv = x.dim(1), len = x.dim(2), d = x.dim(3);
  V e = b.reshape(x, {batch, hkv, 1, len, d});
  e = b.broadcast(e, {batch, hkv, n_rep, len, d});
  return b.reshape(e, {batch, hkv * n_rep, len, d});
}

V attention_prefill(V q, V k, V v, V mask, const AttnOpts& opts) {
  Builder& b = *q.b;
  const int64_t n_rep = group_size(q, k);
  V k_exp = repeat_kv(k, n_rep);
  V v_exp = repeat_kv(v, n_rep);
  V scores = b.matmul(q, b.transpose(k_exp, {0, 1, 3, 2}));  // [B, Hq, T, L]
  V p = masked_softmax(transform_scores(scores, mask, opts));
  return b.matmul(p, v_exp);  // [B, Hq, T, Dv]
}

CachedAttention attention_masked(V q, V k_new, V v_new, V k_cache, V v_cache, V pos, V mask,
                                 const AttnOpts& opts) {
  CachedAttention r = write_caches(k_new, v_new, k_cache, v_cache, pos);
  r.out = attention_prefill(q, widened_as(r.k_cache, q), widened_as(r.v_cache, q), mask, opts);
  return r;
}

CachedAttention attention_cached(V q, V k_new, V v_new, V k_cache, V v_cache, V pos, V mask,
                                 const AttnOpts& opts) {
  CachedAttention r = write_caches(k_new, v_new, k_cache, v_cache, pos);
  const V len = cached_len(pos);
  r.out = attention_live(q, widened_as(r.k_cache, q), widened_as(r.v_cache, q), len, mask, opts);
  return r;
}

CachedAttention attention_latent(V q, V c_new, V r_new, V c_cache, V r_cache, V pos, V mask, const AttnOpts& opts) {
  CachedAttention r = write_caches(c_new, r_new, c_cache, r_cache, pos);
  const V len = cached_len(pos);
  const V c = widened_as(r.k_cache, q);
  r.out = attention_live(q, latent_key(c, widened_as(r.v_cache, q)), c, len, mask, opts);
  return r;
}

namespace {

// What a paged step attends over: the pools with k_new/v_new [B, H, T, D] scattered in
// through `write` [B*T] (in place on the donated pools; out is left for the caller), row
// b's live length pos[b, T-1] + 1 (pos [B, T]), and each row's views of the written pools
// through `read`, widened for q.
struct PagedViews {
  PagedAttention written;
  V len, k, v;
};

PagedViews paged_views(V q, V k_new, V v_new, V k_pool, V v_pool, V write, V read, V pos, V key_pos) {
  Builder& b = *q.b;
  PagedViews w;
  w.written.k_pool = write_pool(k_new, k_pool, write);
  w.written.v_pool = write_pool(v_new, v_pool, write);
  const int64_t t = pos.dim(1);
  V last = b.slice_axis(pos, 1, t - 1, t);  // [B, 1]
  if (key_pos.valid()) {
    V seen = b.compare(key_pos, last, CmpDir::kLe);
    w.len = b.reduce_sum(b.select(seen, b.like(pos, 1.0), b.like(pos, 0.0)), {1});
    // The read row must hold the row's own last position (its key was just written there):
    // a compact map's analogue of a position past the read map's width.
    V newest = b.reduce_max(b.select(seen, key_pos, b.like(key_pos, -1.0)), {1}, true);
    b.validate(b.compare(newest, last, CmpDir::kEq), "paged attention: a read row holds its row's last position");
  } else {
    w.len = b.reshape(last, {pos.dim(0)}) + b.like(pos, 1.0);
  }
  w.k = widened_as(pool_view(w.written.k_pool, read), q);
  w.v = widened_as(pool_view(w.written.v_pool, read), q);
  return w;
}

}  // namespace

PagedAttention attention_paged(V q, V k_new, V v_new, V k_pool, V v_pool, V write, V read, V pos, V mask,
                               const AttnOpts& opts, V key_pos) {
  PagedViews w = paged_views(q, k_new, v_new, k_pool, v_pool, write, read, pos, key_pos);
  w.written.out = attention_live(q, w.k, w.v, w.len, mask, opts);
  return w.written;
}

PagedAttention attention_latent_paged(V q, V c_new, V r_new, V c_pool, V r_pool, V write, V read, V pos, V mask,
                                      const AttnOpts& opts, V key_pos) {
  PagedViews w = paged_views(q, c_new, r_new, c_pool, r_pool, write, read, pos, key_pos);
  w.written.out = attention_live(q, latent_key(w.k, w.v), w.k, w.len, mask, opts);
  return w.written;
}

V index_guard(V x, int64_t lo, int64_t hi, const std::string& what) {
  Builder& b = *x.b;
  V lo_v = b.like(x, static_cast<double>(lo));
  V hi_v = b.like(x, static_cast<double>(hi));
  V above = b.compare(x, lo_v, CmpDir::kGe);
  V below = b.compare(x, hi_v, CmpDir::kLe);
  V ok = b.binary(OpKind::kAnd, above, below);
  b.validate(ok, what);
  return b.binary(OpKind::kMax, b.binary(OpKind::kMin, x, hi_v), lo_v);
}

V attention_live(V q, V k, V v, V len, V mask, const AttnOpts& opts) {
  Builder& b = *q.b;
  const int64_t batch = k.dim(0), lk = k.dim(2);
  V n = index_guard(len, 1, lk, str_cat("attention_live: 1 <= len <= ", lk));
  V key = b.iota({1, lk}, 1);
  V active = b.compare(key, b.reshape(n, {batch, 1}), CmpDir::kLt);  // [B, L]
  // A true select, not a multiply: a NaN in an unused row must not reach the output.
  V rows = b.reshape(active, {batch, 1, lk, 1});
  V k0 = b.select(rows, k, b.like(k, 0.0));
  V v0 = b.select(rows, v, b.like(v, 0.0));
  const int64_t n_rep = group_size(q, k);
  V scores = b.matmul(q, b.transpose(repeat_kv(k0, n_rep), {0, 1, 3, 2}));
  V s = transform_scores(scores, mask, opts);
  s = b.select(b.reshape(active, {batch, 1, 1, lk}), s, b.like(s, -kInf));
  V p = masked_softmax(s);
  return b.matmul(p, repeat_kv(v0, n_rep));
}

}  // namespace kvf::ir::ops
