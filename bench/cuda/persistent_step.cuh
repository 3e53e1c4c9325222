// A TinyLlama-1.1B decode step for one row as ONE persistent kernel: a block resident on
// every SM walks the step's stages, a grid-wide counter between dependent stages in place
// of a kernel boundary. A layer's stages:
//   qkv      x' = RMSNorm(h); qkv = x' · Wqkv
//   attend   rope of q and the new k; block 0 writes the new k, v into the f16 cache at pos;
//            warps take (kv head, key chunk) items: 8 query heads against `chunk` keys with an
//            online softmax (the new key from shared memory, the older ones from the cache)
//   merge    only with several chunks: each query head's chunk partials merged by their
//            log-sum-exp
//   o        h2 = h + attn · Wo
//   gate_up  x' = RMSNorm(h2); gated = silu(x' · Wgate) * (x' · Wup)
//   down     h = h2 + gated · Wdown
// The linear stages come in two forms:
//   - registers: each warp streams its weight rows through registers (kInFlight 16-byte loads
//     a lane before it uses any); before a block waits at a barrier it asks L2 for the head
//     of its next slice (cp.async.bulk.prefetch.L2);
//   - ring: one producer warp brings the block's chunks of whole weight rows into a ring of
//     shared-memory slots by bulk copies (TMA), stage after stage, held back only by a full
//     ring, never by a barrier (weights never depend on the activations); 12 consumer warps,
//     one slot each, wait for the barrier and x, then take the chunks from their slots.
// A prototype the step executor did not take: the bench (layer_bench.cu) checks it against
// the step's own kernels and times both; neither form beats them (docs/benchmarks.md).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/cuda/tma_ptx.cuh"

namespace persistent_step {

constexpr int kLayers = 22, kHidden = 2048, kHeads = 32, kKvHeads = 4, kHeadDim = 64, kFfn = 5632;
constexpr int kRep = kHeads / kKvHeads, kKv = kKvHeads * kHeadDim, kQkv = kHidden + 2 * kKv, kRot = kHeadDim / 2;
constexpr int kPartial = kHeadDim + 2;  // a chunk's partial for one query head: o[64], max, sum
constexpr int kInFlight = 8;            // 16-byte loads of a row a lane issues before it uses any

struct LayerWeights {
  const __half *qkv, *o, *gate_up, *down;  // [2560, 2048], [2048, 2048], [2 * 5632, 2048], [2048, 5632]
  __half *k_cache, *v_cache;                // [kv head][cap][64]
};

struct Args {
  LayerWeights layer[kLayers];
  float *h, *h2, *attn, *qkv, *gated;
  float* partial;  // [kv head][chunks][kRep][kPartial]
  const float* norm_w;
  float eps;
  const float *cos, *sin;  // [kRot] at pos
  int cap, pos;            // keys 0..pos, pos's written by the step
  int chunk, chunks;       // keys per attend item; items per kv head (ceil((pos + 1) / chunk))
  float scale;
  unsigned* counter;
  int prefetch_bytes;  // registers form: of a block's next slice, asked of L2 before each wait
};

enum class Kind { kLinear, kAttend, kMerge };

// One linear stage: out[c] = (residual[c] +) w[c] · x' over columns c, x' = x or its RMSNorm;
// with glu, out[c] = silu(w[c] · x') * (w[n + c] · x').
struct Stage {
  Kind kind = Kind::kLinear;
  int layer = 0;
  const __half* w = nullptr;
  int n = 0, k = 0;
  const float* x = nullptr;
  bool norm = false, glu = false;
  const float* residual = nullptr;
  float* out = nullptr;
};

__host__ __device__ inline int stages_per_layer(const Args& a) { return a.chunks > 1 ? 6 : 5; }
__host__ __device__ inline int stage_count(const Args& a) { return kLayers * stages_per_layer(a); }

__device__ inline Stage stage_of(const Args& a, int index) {
  const int per = stages_per_layer(a), l = index / per, i = index % per;
  const LayerWeights& L = a.layer[l];
  Stage s;
  s.layer = l;
  const int linear = i == 0 ? 0 : i - (per - 4);  // qkv, then o, gate_up, down at the end
  if (i == 1) s.kind = Kind::kAttend;
  else if (i == 2 && per == 6) s.kind = Kind::kMerge;
  else if (linear == 0) s.w = L.qkv, s.n = kQkv, s.k = kHidden, s.x = a.h, s.norm = true, s.out = a.qkv;
  else if (linear == 1) s.w = L.o, s.n = kHidden, s.k = kHidden, s.x = a.attn, s.residual = a.h, s.out = a.h2;
  else if (linear == 2) s.w = L.gate_up, s.n = kFfn, s.k = kHidden, s.x = a.h2, s.norm = s.glu = true, s.out = a.gated;
  else s.w = L.down, s.n = kHidden, s.k = kFfn, s.x = a.gated, s.residual = a.h2, s.out = a.h;
  return s;
}

__device__ inline int slice_begin(int n) { return static_cast<int>(static_cast<int64_t>(n) * blockIdx.x / gridDim.x); }
__device__ inline int slice_end(int n) { return static_cast<int>(static_cast<int64_t>(n) * (blockIdx.x + 1) / gridDim.x); }

// The threads of a block that take part in the stages: W warps from warp 0; with `named`
// they meet at barrier 1 (the rest of the block, a producer, never joins them).
template <int W, bool Named>
struct Team {
  static constexpr int kWarps = W, kThreads = 32 * W;
  // Not bar.sync (barrier.sync.aligned): thread 0 reaches it from the grid barrier's spin,
  // apart from its warp's other lanes.
  __device__ static void sync() {
    if constexpr (Named) asm volatile("barrier.sync 1, %0;" ::"n"(kThreads) : "memory");
    else __syncthreads();
  }
};

// Every block arrives; thread 0 waits until all have (target = blocks x barriers so far).
// The fence before the arrival publishes the team's stores (cumulative over the team's
// barrier); the acquire load orders the team's later loads after everyone's.
template <class T>
__device__ void grid_barrier(unsigned* counter, unsigned target) {
  T::sync();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
    unsigned seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
  }
  T::sync();
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Eight halves (one 16-byte vector) against eight floats of x.
__device__ inline float dot8(const uint4& q, const float* x) {
  const __half2* h = reinterpret_cast<const __half2*>(&q);
  const float4 xa = *reinterpret_cast<const float4*>(x), xb = *reinterpret_cast<const float4*>(x + 4);
  const float2 w0 = __half22float2(h[0]), w1 = __half22float2(h[1]), w2 = __half22float2(h[2]), w3 = __half22float2(h[3]);
  return w0.x * xa.x + w0.y * xa.y + w1.x * xa.z + w1.y * xa.w + w2.x * xb.x + w2.y * xb.y + w3.x * xb.z + w3.y * xb.w;
}

// xs = x, or x's RMSNorm; activations are read through L2 (__ldcg): other SMs wrote them.
template <class T>
__device__ void load_x(const Stage& s, const float* norm_w, float eps, float* xs, float* red) {
  float ss = 0;
  for (int i = threadIdx.x; i < s.k; i += T::kThreads) {
    const float v = __ldcg(s.x + i);
    xs[i] = v;
    ss += v * v;
  }
  if (s.norm) {
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
  }
  T::sync();
  if (!s.norm) return;
  float total = 0;
  for (int w = 0; w < T::kWarps; ++w) total += red[w];
  const float inv = rsqrtf(total / static_cast<float>(s.k) + eps);
  for (int i = threadIdx.x; i < s.k; i += T::kThreads) xs[i] = xs[i] * inv * norm_w[i];
  T::sync();
}

// A finished column (or a glu pair) of a linear stage, written by lane 0.
__device__ inline void store_column(const Stage& s, int c, float a, float up) {
  if (s.glu) s.out[c] = a / (1.0f + expf(-a)) * up;
  else s.out[c] = a + (s.residual != nullptr ? __ldcg(s.residual + c) : 0.0f);
}

// ---- attention ----

// Shared memory of the attend stage (in the x buffer, free then): rope'd q of every head,
// the new token's rope'd k and its v for every kv head.
struct AttendShared {
  float *q, *k_new, *v_new;
};
__device__ inline AttendShared attend_shared(float* base) { return {base, base + kHidden, base + kHidden + kKv}; }
constexpr int kAttendFloats = kHidden + 2 * kKv;

// One (kv head g, chunk c) item by one warp: keys [c * chunk, min((c + 1) * chunk, pos + 1)),
// 32 at a time, one a lane; the group's 8 query heads against each.
__device__ inline void attend_item(const Args& a, const LayerWeights& L, int g, int c, const AttendShared& sh) {
  const int lane = threadIdx.x % 32, t_begin = c * a.chunk, t_end = min(t_begin + a.chunk, a.pos + 1);
  const __half* kc = L.k_cache + static_cast<int64_t>(g) * a.cap * kHeadDim;
  const __half* vc = L.v_cache + static_cast<int64_t>(g) * a.cap * kHeadDim;
  const float* q = sh.q + g * kRep * kHeadDim;
  float m[kRep], l[kRep], o[kRep][2];
#pragma unroll
  for (int h = 0; h < kRep; ++h) m[h] = -INFINITY, l[h] = 0, o[h][0] = o[h][1] = 0;
  for (int t0 = t_begin; t0 < t_end; t0 += 32) {
    const int t = t0 + lane;
    const bool live = t < t_end, cached = live && t < a.pos;
    uint4 key[kHeadDim / 8];
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) {
      key[i] = cached ? __ldg(reinterpret_cast<const uint4*>(kc + static_cast<int64_t>(t) * kHeadDim) + i)
                      : make_uint4(0, 0, 0, 0);
    }
    float s[kRep];
#pragma unroll
    for (int h = 0; h < kRep; ++h) s[h] = 0;
    if (cached) {
#pragma unroll
      for (int i = 0; i < kHeadDim / 8; ++i) {
#pragma unroll
        for (int h = 0; h < kRep; ++h) s[h] += dot8(key[i], q + h * kHeadDim + 8 * i);
      }
    } else if (t == a.pos) {
      for (int d = 0; d < kHeadDim; ++d) {
        const float kd = sh.k_new[g * kHeadDim + d];
#pragma unroll
        for (int h = 0; h < kRep; ++h) s[h] += kd * q[h * kHeadDim + d];
      }
    }
    float p[kRep];
#pragma unroll
    for (int h = 0; h < kRep; ++h) {
      const float sc = live ? s[h] * a.scale : -INFINITY;
      const float m_new = fmaxf(m[h], warp_max(sc));  // finite: lane 0's key is always live
      const float corr = __expf(m[h] - m_new);
      p[h] = live ? __expf(sc - m_new) : 0.0f;
      l[h] = l[h] * corr + warp_sum(p[h]);
      o[h][0] *= corr;
      o[h][1] *= corr;
      m[h] = m_new;
    }
    // v rows t0..t0+31 at this lane's two dims, all issued before any is used (after the
    // scores: the keys' registers are free again).
    const int n = min(32, t_end - t0);
    __half2 vals[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int tj = t0 + j;
      vals[j] = j < n && tj < a.pos ? __ldg(reinterpret_cast<const __half2*>(vc + static_cast<int64_t>(tj) * kHeadDim) + lane)
                                    : __float2half2_rn(0.0f);
    }
    const float2 v_new = make_float2(sh.v_new[g * kHeadDim + 2 * lane], sh.v_new[g * kHeadDim + 2 * lane + 1]);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (j >= n) break;
      const float2 v = t0 + j == a.pos ? v_new : __half22float2(vals[j]);
#pragma unroll
      for (int h = 0; h < kRep; ++h) {
        const float pj = __shfl_sync(0xffffffffu, p[h], j);
        o[h][0] += pj * v.x;
        o[h][1] += pj * v.y;
      }
    }
  }
  for (int h = 0; h < kRep; ++h) {
    if (a.chunks == 1) {
      const float inv = l[h] > 0 ? 1.0f / l[h] : 0.0f;
      float* out = a.attn + (g * kRep + h) * kHeadDim + 2 * lane;
      out[0] = o[h][0] * inv;
      out[1] = o[h][1] * inv;
      continue;
    }
    float* part = a.partial + (static_cast<int64_t>(g * a.chunks + c) * kRep + h) * kPartial;
    part[2 * lane] = o[h][0];
    part[2 * lane + 1] = o[h][1];
    if (lane == 0) part[kHeadDim] = m[h], part[kHeadDim + 1] = l[h];
  }
}

__device__ inline float f16(float x) { return __half2float(__float2half_rn(x)); }

template <class T>
__device__ void attend(const Args& a, int layer, float* smem) {
  const LayerWeights& L = a.layer[layer];
  const AttendShared sh = attend_shared(smem);
  for (int i = threadIdx.x; i < (kHeads + kKvHeads) * kRot; i += T::kThreads) {
    const int head = i / kRot, j = i % kRot;  // q heads, then k heads: contiguous in qkv
    const float x0 = __ldcg(a.qkv + head * kHeadDim + j), x1 = __ldcg(a.qkv + head * kHeadDim + j + kRot);
    float* out = head < kHeads ? sh.q + head * kHeadDim : sh.k_new + (head - kHeads) * kHeadDim;
    float r0 = x0 * a.cos[j] - x1 * a.sin[j], r1 = x1 * a.cos[j] + x0 * a.sin[j];
    if (head >= kHeads) r0 = f16(r0), r1 = f16(r1);  // the new key as the cache holds it
    out[j] = r0;
    out[j + kRot] = r1;
  }
  for (int i = threadIdx.x; i < kKv; i += T::kThreads) sh.v_new[i] = f16(__ldcg(a.qkv + kHidden + kKv + i));
  T::sync();
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < kKv; i += T::kThreads) {
      const int64_t at = (static_cast<int64_t>(i / kHeadDim) * a.cap + a.pos) * kHeadDim + i % kHeadDim;
      L.k_cache[at] = __float2half_rn(sh.k_new[i]);
      L.v_cache[at] = __float2half_rn(sh.v_new[i]);
    }
  }
  const int items = kKvHeads * a.chunks, warp = threadIdx.x / 32;
  for (int item = blockIdx.x * T::kWarps + warp; item < items; item += gridDim.x * T::kWarps) {
    attend_item(a, L, item / a.chunks, item % a.chunks, sh);
  }
}

// Query head hq's output: its chunks' partials weighted by exp(max_c - max) over their sums.
template <class T>
__device__ void merge(const Args& a, float* red) {
  constexpr int kParts = T::kThreads / kHeadDim;
  const int d = threadIdx.x % kHeadDim, part = threadIdx.x / kHeadDim;
  for (int hq = blockIdx.x; hq < kHeads; hq += gridDim.x) {
    const int g = hq / kRep, h = hq % kRep;
    const auto at = [&](int c) { return a.partial + (static_cast<int64_t>(g * a.chunks + c) * kRep + h) * kPartial; };
    float mx = -INFINITY;
    for (int c = 0; c < a.chunks; ++c) mx = fmaxf(mx, __ldcg(at(c) + kHeadDim));
    float acc = 0, sum = 0;
    if (part < kParts) {
      for (int c = part; c < a.chunks; c += kParts) {
        const float w = __expf(__ldcg(at(c) + kHeadDim) - mx);
        acc += w * __ldcg(at(c) + d);
        sum += w * __ldcg(at(c) + kHeadDim + 1);
      }
      red[part * (kHeadDim + 1) + d] = acc;
      if (d == 0) red[part * (kHeadDim + 1) + kHeadDim] = sum;
    }
    T::sync();
    if (part == 0) {
      float o = 0, l = 0;
      for (int p = 0; p < kParts; ++p) o += red[p * (kHeadDim + 1) + d], l += red[p * (kHeadDim + 1) + kHeadDim];
      a.attn[hq * kHeadDim + d] = l > 0 ? o / l : 0.0f;
    }
    T::sync();
  }
}

// ---- the registers form ----

namespace registers {

constexpr int kThreads = 512, kWarps = kThreads / 32;
using Block = Team<kWarps, false>;

__device__ inline void prefetch_l2(const void* p, int bytes) {
  bytes &= ~15;
  if (bytes > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// The first `bytes` of this block's rows of stage s (split between gate and up rows).
__device__ inline void prefetch_slice(const Stage& s, int bytes) {
  if (threadIdx.x != 0 || bytes <= 0 || s.kind != Kind::kLinear) return;
  const int c0 = slice_begin(s.n), c1 = slice_end(s.n);
  const int64_t have = static_cast<int64_t>(c1 - c0) * s.k * 2;
  if (!s.glu) {
    prefetch_l2(s.w + static_cast<int64_t>(c0) * s.k, static_cast<int>(min(have, static_cast<int64_t>(bytes))));
    return;
  }
  const int half = static_cast<int>(min(have, static_cast<int64_t>(bytes / 2)));
  prefetch_l2(s.w + static_cast<int64_t>(c0) * s.k, half);
  prefetch_l2(s.w + static_cast<int64_t>(s.n + c0) * s.k, half);
}

// Sums of two weight rows against xs in every lane: each lane's loads of both rows issued
// before any is used, kInFlight 16-byte vectors a row at a time.
__device__ inline void dot_rows(const __half* const (&rows)[2], const bool (&live)[2], int k, const float* xs,
                                float (&acc)[2]) {
  const int lane = threadIdx.x % 32, vecs = k / 8;
  acc[0] = acc[1] = 0;
  for (int v0 = 0; v0 < vecs; v0 += 32 * kInFlight) {
    uint4 buf[2][kInFlight];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int g = 0; g < kInFlight; ++g) {
        const int v = v0 + g * 32 + lane;
        buf[r][g] = live[r] && v < vecs ? __ldg(reinterpret_cast<const uint4*>(rows[r]) + v) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int g = 0; g < kInFlight; ++g) {
      const int v = v0 + g * 32 + lane;
      if (v >= vecs) break;
#pragma unroll
      for (int r = 0; r < 2; ++r) acc[r] += dot8(buf[r][g], xs + 8 * v);
    }
  }
  acc[0] = warp_sum(acc[0]);
  acc[1] = warp_sum(acc[1]);
}

// The block's slice of a stage, two weight rows a warp at a time: two columns, or one
// column's gate and up rows.
__device__ inline void run_linear(const Stage& s, const float* xs) {
  const int c0 = slice_begin(s.n), c1 = slice_end(s.n), warp = threadIdx.x / 32, step = s.glu ? 1 : 2;
  for (int c = c0 + warp * step; c < c1; c += kWarps * step) {
    const bool second = s.glu || c + 1 < c1;
    const __half* rows[2] = {s.w + static_cast<int64_t>(c) * s.k,
                             s.w + static_cast<int64_t>(s.glu ? s.n + c : min(c + 1, c1 - 1)) * s.k};
    const bool live[2] = {true, second};
    float acc[2];
    dot_rows(rows, live, s.k, xs, acc);
    if (threadIdx.x % 32 != 0) continue;
    if (s.glu) {
      store_column(s, c, acc[0], acc[1]);
      continue;
    }
    store_column(s, c, acc[0], 0);
    if (second) store_column(s, c + 1, acc[1], 0);
  }
}

__global__ void __launch_bounds__(kThreads, 1) step(Args a) {
  __shared__ __align__(16) float xs[kFfn];
  __shared__ float red[kWarps * (kHeadDim + 1)];
  static_assert(kFfn >= kAttendFloats);
  const int stages = stage_count(a);
  prefetch_slice(stage_of(a, 0), a.prefetch_bytes);
  for (int i = 0; i < stages; ++i) {
    const Stage s = stage_of(a, i);
    if (s.kind == Kind::kAttend) attend<Block>(a, s.layer, xs);
    else if (s.kind == Kind::kMerge) merge<Block>(a, red);
    else load_x<Block>(s, a.norm_w, a.eps, xs, red), run_linear(s, xs);
    if (i + 1 == stages) break;
    prefetch_slice(stage_of(a, i + 1), a.prefetch_bytes);
    grid_barrier<Block>(a.counter, gridDim.x * static_cast<unsigned>(i + 1));
  }
}

}  // namespace registers

// ---- the ring form ----

namespace ring {

namespace tma = kvf::exec::cuda::detail::tma;

constexpr int kSlotBytes = 16 << 10;
constexpr int kWarps = 12, kConsumers = 32 * kWarps;  // the producer is one more warp
constexpr int kMaxRows = 4;                           // weight rows a chunk holds
using Consumers = Team<kWarps, true>;

// Columns a chunk covers: whole rows, as many as a slot holds (a glu column is 2 rows).
__device__ inline int chunk_columns(const Stage& s) {
  const int row_bytes = 2 * s.k, per_column = s.glu ? 2 : 1;
  return max(1, min(kMaxRows / per_column, kSlotBytes / (row_bytes * per_column)));
}

__device__ inline uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

struct Shared {
  uint8_t* slots;
  float* xs;
  uint64_t *full, *empty;
  float* red;
  int count;
};

__device__ inline Shared carve(uint8_t* base, int slots) {
  Shared sh;
  sh.slots = base;
  sh.xs = reinterpret_cast<float*>(base + slots * kSlotBytes);
  sh.full = reinterpret_cast<uint64_t*>(sh.xs + kFfn);
  sh.empty = sh.full + slots;
  sh.red = reinterpret_cast<float*>(sh.empty + slots);
  sh.count = slots;
  return sh;
}

inline size_t shared_bytes(int slots) {
  return static_cast<size_t>(slots) * kSlotBytes + kFfn * 4 + 2 * slots * 8 + kWarps * (kHeadDim + 1) * 4;
}

__device__ inline void produce(const Args& a, const Shared& sh) {
  int64_t g = 0;
  const int stages = stage_count(a);
  for (int i = 0; i < stages; ++i) {
    const Stage s = stage_of(a, i);
    if (s.kind != Kind::kLinear) continue;
    const int c0 = slice_begin(s.n), c1 = slice_end(s.n), per = chunk_columns(s);
    for (int c = c0; c < c1; c += per, ++g) {
      const int slot = static_cast<int>(g % sh.count), cols = min(per, c1 - c);
      if (g >= sh.count) tma::mbar_wait(smem(&sh.empty[slot]), static_cast<int>((g / sh.count - 1) & 1));
      const uint32_t bytes = static_cast<uint32_t>(cols) * s.k * 2, dst = smem(sh.slots + slot * kSlotBytes);
      tma::mbar_arrive_expect_tx(smem(&sh.full[slot]), s.glu ? 2 * bytes : bytes);
      tma::load_bulk(dst, s.w + static_cast<int64_t>(c) * s.k, bytes, smem(&sh.full[slot]));
      if (s.glu) tma::load_bulk(dst + bytes, s.w + static_cast<int64_t>(s.n + c) * s.k, bytes, smem(&sh.full[slot]));
    }
  }
}

// One chunk by one warp: `cols` columns' rows (gate rows, then up rows with a glu) from the slot.
__device__ inline void consume_chunk(const Stage& s, int c, int cols, const __half* w, const float* xs) {
  const int lane = threadIdx.x % 32, vecs = s.k / 8, rows = s.glu ? 2 * cols : cols;
  float acc[kMaxRows] = {0, 0, 0, 0};
  for (int v = lane; v < vecs; v += 32) {
#pragma unroll
    for (int r = 0; r < kMaxRows; ++r) {
      if (r >= rows) break;
      acc[r] += dot8(reinterpret_cast<const uint4*>(w + static_cast<int64_t>(r) * s.k)[v], xs + 8 * v);
    }
  }
#pragma unroll
  for (int r = 0; r < kMaxRows; ++r) acc[r] = warp_sum(acc[r]);
  if (lane != 0) return;
#pragma unroll
  for (int i = 0; i < kMaxRows; ++i) {
    if (i >= cols) break;
    if (s.glu) store_column(s, c + i, i == 0 ? acc[0] : acc[1], i == 0 ? acc[cols] : acc[cols + 1]);
    else store_column(s, c + i, acc[i], 0);
  }
}

// Chunk g is warp g % slots's, in that warp's own slot: a warp waits for its slot's phases
// in turn, never two ahead (a parity wait cannot tell phase p from p + 2).
__device__ inline void consume_linear(const Stage& s, const Shared& sh, int64_t& base) {
  const int warp = threadIdx.x / 32;
  const int c0 = slice_begin(s.n), c1 = slice_end(s.n), per = chunk_columns(s);
  const int chunks = (c1 - c0 + per - 1) / per;
  const int first = warp < sh.count ? static_cast<int>((warp - base % sh.count + sh.count) % sh.count) : chunks;
  for (int j = first; j < chunks; j += sh.count) {
    const int64_t g = base + j;
    const int c = c0 + j * per;
    tma::mbar_wait(smem(&sh.full[warp]), static_cast<int>((g / sh.count) & 1));
    consume_chunk(s, c, min(per, c1 - c), reinterpret_cast<const __half*>(sh.slots + warp * kSlotBytes), sh.xs);
    __syncwarp();
    if (threadIdx.x % 32 == 0) tma::mbar_arrive(smem(&sh.empty[warp]));
  }
  base += chunks;
}

__global__ void __launch_bounds__(kConsumers + 32, 1) step(Args a, int slots) {
  extern __shared__ __align__(128) uint8_t dyn[];
  const Shared sh = carve(dyn, slots);
  if (threadIdx.x == 0) {
    for (int i = 0; i < slots; ++i) {
      tma::mbar_init(smem(&sh.full[i]), 1);
      tma::mbar_init(smem(&sh.empty[i]), 1);
    }
    tma::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumers) {
    if (threadIdx.x == kConsumers) produce(a, sh);
    return;
  }
  int64_t base = 0;
  const int stages = stage_count(a);
  for (int i = 0; i < stages; ++i) {
    const Stage s = stage_of(a, i);
    if (i > 0) grid_barrier<Consumers>(a.counter, gridDim.x * static_cast<unsigned>(i));
    if (s.kind == Kind::kAttend) attend<Consumers>(a, s.layer, sh.xs);
    else if (s.kind == Kind::kMerge) merge<Consumers>(a, sh.red);
    else load_x<Consumers>(s, a.norm_w, a.eps, sh.xs, sh.red), consume_linear(s, sh, base);
  }
}

}  // namespace ring

}  // namespace persistent_step
