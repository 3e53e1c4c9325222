// Row draws on the GPU (exec/row_draw.h), one block a row, without sorting the row: the cuts
// (top-k's k-th candidate, the top-p prefix, min-p's last kept weight) are found by a radix
// select over the logits' order keys (8 bits a level, 4 levels; a histogram of candidate
// counts, or of weights for top-p), and the draw by one scan of the kept weights in id order.
// Weights are integers (w·2^40), so every sum is exact and order-free: the same token on
// every run, and the host's draw_row's unless an expf differs in its last bit at a boundary.
#include <cstdint>

#include "exec/cuda/step/block_argmax.cuh"
#include "exec/cuda/step/launch.cuh"
#include "exec/row_draw.h"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kDrawThreads = 512;
constexpr int kDrawWarps = kDrawThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr uint32_t kTopPPool = 1024;  // candidates a top-p cut is first looked for among
using u64 = unsigned long long;

// Larger logit, larger key (a float's bits made monotone); 0 for NaN, which is never a
// candidate (-inf is: its key is 0x007fffff).
__device__ uint32_t order_key(float l) {
  if (l != l) return 0;
  const uint32_t b = __float_as_uint(l);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ float key_logit(uint32_t k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

__device__ u64 draw_weight(float l, float top, float inv_t) {
  return l != l ? 0 : __float2ull_rn(expf((l - top) * inv_t) * 0x1p40f);
}

// The candidates a cut keeps: every key above `key`, and the first `ties` (in id order) of
// the `tie_total` candidates whose key is `key`; `before` counts those above.
struct Cut {
  uint32_t key = 0;
  uint32_t ties = 0;
  uint32_t tie_total = 0;
  uint32_t before = 0;
};

struct DrawShared {
  uint32_t count[256];
  u64 mass[256];
  u64 part64[kDrawWarps];
  uint32_t part32[kDrawWarps];
  float part_f[kDrawWarps];
  int bucket;  // the radix level's pick, and what lies above it
  uint32_t count_before, bucket_count;
  u64 mass_before;
};

// Block-wide sums and maxima, returned to every thread.
template <typename T>
__device__ T block_sum(T v, T* part) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  __syncthreads();  // part may still be read by a previous call
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < kDrawWarps; ++w) s += part[w];
  return s;
}

__device__ float block_max(float v, float* part) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kDrawWarps; ++w) m = fmaxf(m, part[w]);
  return m;
}

// The sum of v over the threads before this one (thread order), and the block's total.
template <typename T>
__device__ T block_exclusive_scan(T v, T* part, T& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += y;
  }
  __syncthreads();
  if (lane == 31) part[warp] = incl;
  __syncthreads();
  T base = 0;
  total = 0;
  for (int w = 0; w < kDrawWarps; ++w) {
    if (w < warp) base += part[w];
    total += part[w];
  }
  return base + incl - v;
}

// Warp 0, over a complete histogram: the first bucket, from the top, where the running
// measure (counts, or weights when by_mass) of the candidates reaches `target`, given what
// lies above this level's prefix. Lane L holds buckets 255 - 8L down to 248 - 8L.
__device__ void pick_bucket(DrawShared& sh, bool by_mass, u64 target, uint32_t count_before, u64 mass_before) {
  const int lane = threadIdx.x;
  u64 own = 0;
  uint32_t own_count = 0;
  for (int j = 0; j < 8; ++j) {
    const int b = 255 - lane * 8 - j;
    own += by_mass ? sh.mass[b] : sh.count[b];
    own_count += sh.count[b];
  }
  u64 incl = own;
  uint32_t incl_count = own_count;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(kFull, incl, o);
    const uint32_t yc = __shfl_up_sync(kFull, incl_count, o);
    if (lane >= o) incl += y, incl_count += yc;
  }
  const u64 base = by_mass ? mass_before : count_before;
  const unsigned reached = __ballot_sync(kFull, base + incl >= target);
  const int first = reached != 0 ? __ffs(reached) - 1 : 31;  // callers ask only for what is there
  if (lane != first) return;
  u64 acc = base + incl - own;
  uint32_t acc_count = count_before + incl_count - own_count;
  for (int j = 0; j < 8; ++j) {
    const int b = 255 - lane * 8 - j;
    const u64 m = by_mass ? sh.mass[b] : sh.count[b];
    if (acc + m >= target || j == 7) {
      sh.bucket = b;
      sh.count_before = acc_count;
      sh.mass_before = by_mass ? acc : 0;
      sh.bucket_count = sh.count[b];
      return;
    }
    acc += m;
    acc_count += sh.count[b];
  }
}

// The shortest prefix of the candidates in order whose count (by_mass: weight) reaches
// target (at least 1, and at most what the row holds). Only keys of at least floor_key take
// part: they must be a prefix of the order that reaches the target.
__device__ Cut select(const float* x, int64_t d, float top, float inv_t, bool by_mass, u64 target, uint32_t floor_key,
                      DrawShared& sh) {
  uint32_t prefix = 0, mask = 0, count_before = 0;
  u64 mass_before = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kDrawThreads) sh.count[b] = 0, sh.mass[b] = 0;
    __syncthreads();
    // Every lane runs every trip (a uniform trip count) so that the warp can match buckets.
    for (int64_t base = 0; base < d; base += kDrawThreads) {
      const int64_t i = base + threadIdx.x;
      const float l = i < d ? x[i] : __int_as_float(0x7fc00000);  // past the row: NaN, no candidate
      const uint32_t k = order_key(l);
      const bool in = k != 0 && k >= floor_key && (k & mask) == prefix;
      const uint32_t bucket = in ? (k >> shift) & 255u : 256u;
      const unsigned peers = __match_any_sync(kFull, bucket);
      if (in && static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) atomicAdd(&sh.count[bucket], __popc(peers));
      if (in && by_mass) atomicAdd(&sh.mass[bucket], draw_weight(l, top, inv_t));
    }
    __syncthreads();
    if (threadIdx.x < 32) pick_bucket(sh, by_mass, target, count_before, mass_before);
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh.bucket) << shift;
    mask |= 0xffu << shift;
    count_before = sh.count_before;
    mass_before = sh.mass_before;
  }
  Cut c{prefix, 0, sh.bucket_count, count_before};
  if (!by_mass) {
    c.ties = static_cast<uint32_t>(target) - count_before;
  } else {
    const u64 w = draw_weight(key_logit(prefix), top, inv_t);
    const u64 need = w == 0 ? c.tie_total : (target - mass_before + w - 1) / w;
    c.ties = static_cast<uint32_t>(need < c.tie_total ? need : c.tie_total);
  }
  __syncthreads();  // sh is read above before the next select clears it
  return c;
}

// The weight of the candidates a cut keeps.
__device__ u64 kept_weight(const float* x, int64_t d, float top, float inv_t, const Cut& c, DrawShared& sh) {
  u64 s = 0;
  for (int64_t i = threadIdx.x; i < d; i += kDrawThreads) {
    if (order_key(x[i]) > c.key) s += draw_weight(x[i], top, inv_t);
  }
  s = block_sum(s, sh.part64);
  return c.key == 0 ? s : s + static_cast<u64>(c.ties) * draw_weight(key_logit(c.key), top, inv_t);
}

// The token where the running weight of the kept candidates, in id order, first exceeds
// u · their total. Each thread walks a contiguous chunk of ids so that one scan places it.
__device__ void draw_kept(const float* x, int64_t d, float top, float inv_t, const Cut& c, float u, DrawShared& sh,
                          int32_t* out) {
  const int64_t chunk = (d + kDrawThreads - 1) / kDrawThreads;
  const int64_t lo = min(d, threadIdx.x * chunk), hi = min(d, lo + chunk);
  u64 above = 0;
  uint32_t tied = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const uint32_t k = order_key(x[i]);
    if (k > c.key) above += draw_weight(x[i], top, inv_t);
    else if (k == c.key && k != 0) ++tied;
  }
  uint32_t tied_total = 0;
  const uint32_t rank = block_exclusive_scan(tied, sh.part32, tied_total);
  const uint32_t mine = c.ties > rank ? min(tied, c.ties - rank) : 0u;
  const u64 w_tie = c.key != 0 ? draw_weight(key_logit(c.key), top, inv_t) : 0;
  const u64 own = above + static_cast<u64>(mine) * w_tie;
  u64 total = 0;
  const u64 base = block_exclusive_scan(own, sh.part64, total);
  const auto target = static_cast<u64>(static_cast<double>(u) * static_cast<double>(total));
  if (!(base <= target && target < base + own)) return;  // exactly one thread's weight holds it
  u64 sum = base;
  uint32_t r = rank;
  for (int64_t i = lo; i < hi; ++i) {
    const uint32_t k = order_key(x[i]);
    const bool kept = k > c.key || (k == c.key && k != 0 && r++ < c.ties);
    if (!kept) continue;
    sum += draw_weight(x[i], top, inv_t);
    if (sum > target) {
      *out = static_cast<int32_t>(i);
      return;
    }
  }
}

__global__ void __launch_bounds__(kDrawThreads)
    draw_tokens_kernel(float* logits, int64_t d, const RowDraw* draws, const LogitEdit* edits, int32_t* out) {
  __shared__ DrawShared sh;
  const RowDraw dr = draws[blockIdx.x];
  float* x = logits + blockIdx.x * d;
  for (int e = threadIdx.x; e < dr.edits; e += kDrawThreads) {
    const LogitEdit ed = edits[dr.first_edit + e];
    if (ed.token >= 0 && ed.token < d) x[ed.token] = edited_logit(x[ed.token], ed, dr.repeat_penalty);
  }
  __syncthreads();  // the edits are visible to the whole block

  float m = -INFINITY;
  uint32_t valid = 0;
  if (dr.temperature > 0) {
    for (int64_t i = threadIdx.x; i < d; i += kDrawThreads) {
      const float l = x[i];
      if (l == l) m = fmaxf(m, l), ++valid;
    }
    m = block_max(m, sh.part_f);
    valid = block_sum(valid, sh.part32);
  }
  if (!(dr.temperature > 0) || !isfinite(m)) {  // greedy, or a row without a finite largest logit
    const int32_t at = block_argmax<kDrawThreads>(x, d);
    if (threadIdx.x == 0) out[blockIdx.x] = at;
    return;
  }
  const float inv_t = 1.0f / dr.temperature;
  uint32_t keep = valid;
  Cut cut;  // keeps every candidate
  if (dr.top_k > 0 && static_cast<uint32_t>(dr.top_k) < keep) {
    keep = static_cast<uint32_t>(dr.top_k);
    cut = select(x, d, m, inv_t, false, keep, 0, sh);
  }
  if (dr.top_p < 1) {
    const u64 z = kept_weight(x, d, m, inv_t, cut, sh);
    const double want = ceil(static_cast<double>(dr.top_p) * static_cast<double>(z));
    const u64 target = want < 1 ? 1 : static_cast<u64>(want);
    // The weight histograms take one shared-memory atomic a candidate, on a few hot buckets:
    // they see only the top-k prefix, or the kTopPPool best when those reach the target (a
    // peaked row's usually do), not the whole vocabulary.
    uint32_t floor_key = cut.key;
    if (floor_key == 0 && valid > kTopPPool) {
      const Cut pool = select(x, d, m, inv_t, false, kTopPPool, 0, sh);
      const Cut all_ties{pool.key, pool.tie_total, pool.tie_total, pool.before};
      if (kept_weight(x, d, m, inv_t, all_ties, sh) >= target) floor_key = pool.key;
    }
    const Cut p = select(x, d, m, inv_t, true, target, floor_key, sh);
    if (p.before + p.ties < keep) keep = p.before + p.ties, cut = p;
  }
  if (dr.min_p > 0) {
    const double floor_w = static_cast<double>(dr.min_p) * kDrawWeightOne;
    uint32_t n = 0;
    for (int64_t i = threadIdx.x; i < d; i += kDrawThreads) {
      n += static_cast<double>(draw_weight(x[i], m, inv_t)) >= floor_w ? 1u : 0u;
    }
    n = max(block_sum(n, sh.part32), 1u);
    if (n < keep) keep = n, cut = select(x, d, m, inv_t, false, keep, 0, sh);
  }
  draw_kept(x, d, m, inv_t, cut, dr.uniform, sh, out + blockIdx.x);
}

}  // namespace

void draw_tokens(float* logits, int64_t rows, int64_t d, const RowDraw* draws, const LogitEdit* edits, int32_t* out,
                 const Launch& l) {
  if (rows == 0) return;
  draw_tokens_kernel<<<static_cast<unsigned>(rows), kDrawThreads, 0, stream_of(l)>>>(logits, d, draws, edits, out);
}

}  // namespace kvf::exec::cuda::step
