// The fused Attention op's whole contract on the GPU (exec/cpu/attention.h): dense or paged
// keys, f32 or f16 K/V, a split (shared) key, an additive mask of any broadcast, a live
// length and a softcap.
//
// One block per (query row, key split). Its warps take tiles of 32 keys, one key per lane:
// each lane scores its key whole, the warp keeps an online softmax per tile (one max and one
// sum per 32 keys), and the tile's values are accumulated lane-per-output-element. With one
// split the block writes the row; with several, each writes its partial (m, l, o) and a
// second kernel merges them (Flash-Decoding), so that a few long rows still fill the GPU.
#include <algorithm>

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kWarps = 4;

// o / l, where l is 0 only for a row that saw no key (a key seen adds e^0 = 1 at its max):
// that row is zeros, as every attention backend gives it.
__device__ float normalized(float o, float l) { return l == 0.0f ? 0.0f : o / l; }

// A row's softmax state as its partials merge (kernels.h): m from natural to log2 units.
__device__ void store_ml(float* ml, int64_t row, float m, float l) {
  if (ml == nullptr) return;
  ml[2 * row] = l > 0.0f ? m * 1.4426950408889634f : -INFINITY;
  ml[2 * row + 1] = l;
}

__device__ float load_kv(bool f16, const void* p, int64_t i) {
  return f16 ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}

// Element offset of key t's row of KV head g in a K or V of `width` elements a head: at pool
// row `slot` when the keys are paged (slot >= 0), else in batch row b's dense cache.
__device__ int64_t kv_row(const AttentionArgs& a, int64_t slot, int64_t b, int64_t g, int64_t t, int64_t width) {
  return slot >= 0 ? (slot * a.hkv + g) * width : ((b * a.hkv + g) * a.lk + t) * width;
}

// This lane's elements (lane + 32 c) of the V row at `off`; zeros past dv.
template <int NV>
__device__ void load_v_row(const AttentionArgs& a, int64_t off, int lane, float (&v)[NV]) {
#pragma unroll
  for (int c = 0; c < NV; ++c) {
    const int64_t e = lane + 32 * c;
    v[c] = e < a.dv ? load_kv(a.kv_dtype == DType::kF16, a.v, off + e) : 0.0f;
  }
}

// Keys per split over the row's live keys (not the capacity), so that a short row still
// spreads over every split; at least 8 keys a split.
__device__ int64_t live_chunk(int64_t keys, int64_t splits) {
  const int64_t c = (keys + splits - 1) / splits;
  return c < 8 ? 8 : c;
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// R queries (rows of qs, dq apart) dotted with one key row of N elements (a head width
// known at compile time): the row is read once, 128 bytes at a time, every load of a chunk
// issued before its products. The chunks themselves stay a loop: unrolled too, the eleven
// kernels that inline this took a clean build four times as long to compile.
template <int N, int R>
__device__ void dot_rows_fixed(const float* qs, int64_t dq, bool f16, const void* base, int64_t off, float (&dots)[R]) {
  if (f16) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + off);
#pragma unroll 1
    for (int j0 = 0; j0 < N / 8; j0 += 8) {
      uint4 u[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] = p[j0 + j];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const __half2* h = reinterpret_cast<const __half2*>(&u[j]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 f = __half22float2(h[i]);
          const int e = 8 * (j0 + j) + 2 * i;
#pragma unroll
          for (int r = 0; r < R; ++r) dots[r] += qs[r * dq + e] * f.x + qs[r * dq + e + 1] * f.y;
        }
      }
    }
  } else {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + off);
#pragma unroll 1
    for (int j0 = 0; j0 < N / 4; j0 += 8) {
      float4 f[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = p[j0 + j];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int e = 4 * (j0 + j);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          dots[r] += qs[r * dq + e] * f[j].x + qs[r * dq + e + 1] * f[j].y + qs[r * dq + e + 2] * f[j].z +
                     qs[r * dq + e + 3] * f[j].w;
        }
      }
    }
  }
}

// The same for any width n: 16-byte loads where the row allows them, else element by element.
template <int R>
__device__ void dot_rows(const float* qs, int64_t dq, bool f16, const void* base, int64_t off, int64_t n, float (&dots)[R]) {
  if (n == 64 && off % 8 == 0) return dot_rows_fixed<64, R>(qs, dq, f16, base, off, dots);
  if (n == 128 && off % 8 == 0) return dot_rows_fixed<128, R>(qs, dq, f16, base, off, dots);
  for (int64_t j = 0; j < n; ++j) {
    const float kv = load_kv(f16, base, off + j);
#pragma unroll
    for (int r = 0; r < R; ++r) dots[r] += qs[r * dq + j] * kv;
  }
}

// NV: value elements per lane (dv <= 32 * NV). partial: null when the grid has one split.
template <int NV>
__global__ void __launch_bounds__(kWarps * 32) attention_rows_kernel(AttentionArgs a, float* partial, float* ml) {
  extern __shared__ float smem[];
  const int64_t dq = a.dk + a.ds;
  float* qs = smem;                          // [dq]
  float* part = smem + dq;                   // [kWarps][dv + 2]
  const int64_t row = blockIdx.x;            // (b, h, i)
  const int64_t i = row % a.lq, h = (row / a.lq) % a.hq, b = row / (a.lq * a.hq);
  const int64_t g = h / (a.hq / a.hkv);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t j = threadIdx.x; j < dq; j += blockDim.x) qs[j] = a.q[row * dq + j];
  __syncthreads();

  int64_t keys = a.lk;
  if (a.len != nullptr) keys = min(max(static_cast<int64_t>(a.len[b]), int64_t{0}), a.lk);
  const int64_t chunk = live_chunk(keys, gridDim.y);
  const int64_t begin = blockIdx.y * chunk, end = min(keys, begin + chunk);
  const float* mrow = nullptr;
  if (a.mask != nullptr) {
    const int64_t mb = a.mask_batch == 1 ? 0 : b, mh = a.mask_heads == 1 ? 0 : h;
    mrow = a.mask + ((mb * a.mask_heads + mh) * a.lq + i) * a.lk;
  }
  float m = -INFINITY, l = 0.0f, acc[NV] = {};
  for (int64_t t0 = begin + warp * 32; t0 < end; t0 += kWarps * 32) {
    const int64_t t = t0 + lane;
    int64_t slot = -1;
    float s = -INFINITY;
    if (t < end) {
      slot = a.read != nullptr ? a.read[b * a.lk + t] : -1;
      const int64_t k_off = kv_row(a, slot, b, g, t, a.dk);
      float dot[1] = {0.0f};
      dot_rows<1>(qs, dq, a.kv_dtype == DType::kF16, a.k, k_off, a.dk, dot);
      if (a.ds > 0) dot_rows<1>(qs + a.dk, dq, a.kv_dtype == DType::kF16, a.k_shared, slot >= 0 ? slot * a.ds : (b * a.lk + t) * a.ds, a.ds, dot);
      s = dot[0] * a.scale;
      if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      if (mrow != nullptr) s += mrow[t];
    }
    const float tile_max = warp_max(s);
    if (tile_max == -INFINITY) continue;  // every key of the tile masked: it adds exactly nothing
    const float m_new = fmaxf(m, tile_max);
    const float corr = expf(m - m_new);
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int c = 0; c < NV; ++c) acc[c] *= corr;
    // The tile's values, kKeys keys at a time with every load issued before any is used: the
    // loads of one key do not wait for the previous key's. Keys past the tile's end reuse
    // its first key (finite values) with weight 0.
    const int n = static_cast<int>(end - t0 < 32 ? end - t0 : 32);
    constexpr int kKeys = NV <= 8 ? 8 : 2;  // registers: kKeys * NV values in flight
    for (int j0 = 0; j0 < n; j0 += kKeys) {
      float pj[kKeys], vj[kKeys][NV];
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        const int j = j0 + u < n ? j0 + u : 0;
        const float pu = __shfl_sync(0xffffffffu, p, j);
        pj[u] = j0 + u < n ? pu : 0.0f;
        const int64_t sj = __shfl_sync(0xffffffffu, slot, j);
        load_v_row(a, kv_row(a, sj, b, g, t0 + j, a.dv), lane, vj[u]);
      }
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
#pragma unroll
        for (int c = 0; c < NV; ++c) acc[c] += pj[u] * vj[u][c];
      }
    }
    m = m_new;
  }
  float* mine = part + warp * (a.dv + 2);
#pragma unroll
  for (int c = 0; c < NV; ++c) {
    const int64_t e = lane + 32 * c;
    if (e < a.dv) mine[e] = acc[c];
  }
  if (lane == 0) {
    mine[a.dv] = m;
    mine[a.dv + 1] = l;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, part[w * (a.dv + 2) + a.dv]);
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    const float mw = part[w * (a.dv + 2) + a.dv];
    if (mw != -INFINITY) total += part[w * (a.dv + 2) + a.dv + 1] * expf(mw - mx);
  }
  float* dst = partial != nullptr ? partial + (row * gridDim.y + blockIdx.y) * (a.dv + 2) : nullptr;
  for (int64_t e = threadIdx.x; e < a.dv; e += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float mw = part[w * (a.dv + 2) + a.dv];
      if (mw != -INFINITY) o += part[w * (a.dv + 2) + e] * expf(mw - mx);
    }
    if (dst != nullptr) dst[e] = o;
    else a.out[row * a.dv + e] = normalized(o, total);
  }
  if (dst != nullptr && threadIdx.x == 0) {
    dst[a.dv] = mx;
    dst[a.dv + 1] = total;
  }
  if (dst == nullptr && threadIdx.x == 0) store_ml(ml, row, mx, total);
}

// The GQA form: one block per (row b, key head g, query row i, key split) serves the R =
// hq / hkv query heads that share the key head, so every key and value row is read once for
// all of them. Otherwise as attention_rows_kernel: one key per lane, online softmax per
// head, the warps merged at the end (lane-partial sums l are reduced only there).
template <int NV, int R>
__global__ void __launch_bounds__(kWarps * 32) attention_group_kernel(AttentionArgs a, float* partial, float* ml) {
  extern __shared__ float smem[];
  const int64_t dq = a.dk + a.ds;
  float* qs = smem;                       // [R][dq]
  float* part = smem + R * dq;            // [kWarps][R][dv + 2]
  const int64_t cell = blockIdx.x;        // (b, g, i)
  const int64_t i = cell % a.lq, g = (cell / a.lq) % a.hkv, b = cell / (a.lq * a.hkv);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto q_row = [&](int r) { return (b * a.hq + g * R + r) * a.lq + i; };
  for (int64_t j = threadIdx.x; j < R * dq; j += blockDim.x) qs[j] = a.q[q_row(static_cast<int>(j / dq)) * dq + j % dq];
  __syncthreads();

  int64_t keys = a.lk;
  if (a.len != nullptr) keys = min(max(static_cast<int64_t>(a.len[b]), int64_t{0}), a.lk);
  const int64_t chunk = live_chunk(keys, gridDim.y);
  const int64_t begin = blockIdx.y * chunk, end = min(keys, begin + chunk);
  const float* mrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    mrow[r] = nullptr;
    if (a.mask != nullptr) {
      const int64_t mb = a.mask_batch == 1 ? 0 : b, mh = a.mask_heads == 1 ? 0 : g * R + r;
      mrow[r] = a.mask + ((mb * a.mask_heads + mh) * a.lq + i) * a.lk;
    }
  }
  float m[R], l[R], acc[R][NV];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < NV; ++c) acc[r][c] = 0.0f;
  }
  for (int64_t t0 = begin + warp * 32; t0 < end; t0 += kWarps * 32) {
    const int64_t t = t0 + lane;
    int64_t slot = -1;
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) s[r] = -INFINITY;
    if (t < end) {
      slot = a.read != nullptr ? a.read[b * a.lk + t] : -1;
      const int64_t k_off = kv_row(a, slot, b, g, t, a.dk);
      const int64_t s_off = slot >= 0 ? slot * a.ds : (b * a.lk + t) * a.ds;
      float dot[R] = {};
      dot_rows<R>(qs, dq, a.kv_dtype == DType::kF16, a.k, k_off, a.dk, dot);
      if (a.ds > 0) dot_rows<R>(qs + a.dk, dq, a.kv_dtype == DType::kF16, a.k_shared, s_off, a.ds, dot);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float v = dot[r] * a.scale;
        if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
        if (mrow[r] != nullptr) v += mrow[r][t];
        s[r] = v;
      }
    }
    float p[R];
    bool any = false;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float tile_max = warp_max(s[r]);
      p[r] = 0.0f;
      if (tile_max == -INFINITY) continue;  // this head sees none of the tile's keys
      any = true;
      const float m_new = fmaxf(m[r], tile_max);
      const float corr = expf(m[r] - m_new);
      p[r] = s[r] == -INFINITY ? 0.0f : expf(s[r] - m_new);
      l[r] = l[r] * corr + p[r];
#pragma unroll
      for (int c = 0; c < NV; ++c) acc[r][c] *= corr;
      m[r] = m_new;
    }
    if (!any) continue;
    const int n = static_cast<int>(end - t0 < 32 ? end - t0 : 32);
    for (int j0 = 0; j0 < n; j0 += 4) {
      float vj[4][NV];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + u < n ? j0 + u : 0;  // past the end: key 0 of the tile, weight 0
        const int64_t sj = __shfl_sync(0xffffffffu, slot, j);
        load_v_row(a, kv_row(a, sj, b, g, t0 + j, a.dv), lane, vj[u]);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = j0 + u < n ? j0 + u : 0;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float pj = j0 + u < n ? __shfl_sync(0xffffffffu, p[r], j) : 0.0f;
#pragma unroll
          for (int c = 0; c < NV; ++c) acc[r][c] += pj * vj[u][c];
        }
      }
    }
  }
  const int64_t stride = a.dv + 2;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float* mine = part + (warp * R + r) * stride;
    const float lsum = warp_sum(l[r]);
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int64_t e = lane + 32 * c;
      if (e < a.dv) mine[e] = acc[r][c];
    }
    if (lane == 0) {
      mine[a.dv] = m[r];
      mine[a.dv + 1] = lsum;
    }
  }
  __syncthreads();
  for (int r = 0; r < R; ++r) {
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, part[(w * R + r) * stride + a.dv]);
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float mw = part[(w * R + r) * stride + a.dv];
      if (mw != -INFINITY) total += part[(w * R + r) * stride + a.dv + 1] * expf(mw - mx);
    }
    const int64_t row = q_row(r);
    float* dst = partial != nullptr ? partial + (row * gridDim.y + blockIdx.y) * stride : nullptr;
    for (int64_t e = threadIdx.x; e < a.dv; e += blockDim.x) {
      float o = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float mw = part[(w * R + r) * stride + a.dv];
        if (mw != -INFINITY) o += part[(w * R + r) * stride + e] * expf(mw - mx);
      }
      if (dst != nullptr) dst[e] = o;
      else a.out[row * a.dv + e] = normalized(o, total);
    }
    if (dst != nullptr && threadIdx.x == 0) {
      dst[a.dv] = mx;
      dst[a.dv + 1] = total;
    }
    if (dst == nullptr && threadIdx.x == 0) store_ml(ml, row, mx, total);
  }
}

// One block per row: the splits' partials merged as one softmax.
__global__ void merge_splits_kernel(const float* partial, int splits, int64_t dv, float* out, float* ml) {
  const float* p = partial + static_cast<int64_t>(blockIdx.x) * splits * (dv + 2);
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, p[s * (dv + 2) + dv]);
  float total = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ms = p[s * (dv + 2) + dv];
    if (ms != -INFINITY) total += p[s * (dv + 2) + dv + 1] * expf(ms - mx);
  }
  for (int64_t e = threadIdx.x; e < dv; e += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float ms = p[s * (dv + 2) + dv];
      if (ms != -INFINITY) o += p[s * (dv + 2) + e] * expf(ms - mx);
    }
    out[static_cast<int64_t>(blockIdx.x) * dv + e] = normalized(o, total);
  }
  if (threadIdx.x == 0) store_ml(ml, blockIdx.x, mx, total);
}

}  // namespace

namespace {

// Value elements per lane for the value width.
int value_lanes(int64_t dv) { return dv <= 64 ? 2 : dv <= 128 ? 4 : dv <= 256 ? 8 : 32; }

size_t group_smem(const AttentionArgs& a, int r) {
  return static_cast<size_t>(r * (a.dk + a.ds) + kWarps * r * (a.dv + 2)) * sizeof(float);
}

// Query heads per key head that the GQA kernel serves in one block, or 0 (the row kernel).
int group_heads(const AttentionArgs& a) {
  const int64_t r = a.hq / a.hkv;
  if (r != 1 && r != 2 && r != 4 && r != 8) return 0;
  if (a.dv > 256 || r * value_lanes(a.dv) > 32 || group_smem(a, static_cast<int>(r)) > 48 * 1024) return 0;
  return static_cast<int>(r);
}

template <int NV, int R>
void launch_group(const AttentionArgs& a, dim3 grid, float* partial, float* ml, cudaStream_t s) {
  attention_group_kernel<NV, R><<<grid, kWarps * 32, group_smem(a, R), s>>>(a, partial, ml);
}

template <int NV>
void launch_group_nv(const AttentionArgs& a, int r, dim3 grid, float* partial, float* ml, cudaStream_t s) {
  switch (r) {
    case 1: launch_group<NV, 1>(a, grid, partial, ml, s); return;
    case 2: launch_group<NV, 2>(a, grid, partial, ml, s); return;
    case 4: launch_group<NV, 4>(a, grid, partial, ml, s); return;
    default:
      if constexpr (NV * 8 <= 32) launch_group<NV, 8>(a, grid, partial, ml, s);
      return;
  }
}

}  // namespace

void attention_rows(const AttentionArgs& a, int splits, float* workspace, const Launch& l, float* ml) {
  const int64_t rows = a.batch * a.hq * a.lq;
  if (rows == 0) return;
  float* partial = splits > 1 ? workspace : nullptr;
  cudaStream_t s = stream_of(l);
  if (const int r = group_heads(a); r > 0) {
    const dim3 grid(static_cast<unsigned>(rows / r), static_cast<unsigned>(splits));
    switch (value_lanes(a.dv)) {
      case 2: launch_group_nv<2>(a, r, grid, partial, ml, s); break;
      case 4: launch_group_nv<4>(a, r, grid, partial, ml, s); break;
      default: launch_group_nv<8>(a, r, grid, partial, ml, s); break;
    }
  } else {
    const size_t smem = static_cast<size_t>(a.dk + a.ds + kWarps * (a.dv + 2)) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(splits));
    if (a.dv <= 64) attention_rows_kernel<2><<<grid, kWarps * 32, smem, s>>>(a, partial, ml);
    else if (a.dv <= 256) attention_rows_kernel<8><<<grid, kWarps * 32, smem, s>>>(a, partial, ml);
    else attention_rows_kernel<32><<<grid, kWarps * 32, smem, s>>>(a, partial, ml);
  }
  if (partial != nullptr) merge_splits_kernel<<<static_cast<unsigned>(rows), 128, 0, s>>>(partial, splits, a.dv, a.out, ml);
}

}  // namespace kvf::exec::cuda::step
