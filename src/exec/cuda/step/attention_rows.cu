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

__device__ float load_kv(bool f16, const void* p, int64_t i) {
  return f16 ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// q . key over N (a head width known at compile time) elements: every 16-byte load of the
// row issued before the first product, so a lane waits for its row once.
template <int N>
__device__ float dot_row_fixed(const float* q, bool f16, const void* base, int64_t off) {
  float acc = 0.0f;
  if (f16) {
    uint4 u[N / 8];
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + off);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) u[j] = p[j];
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const __half2* h = reinterpret_cast<const __half2*>(&u[j]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        acc += q[8 * j + 2 * i] * f.x + q[8 * j + 2 * i + 1] * f.y;
      }
    }
  } else {
    float4 f[N / 4];
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + off);
#pragma unroll
    for (int j = 0; j < N / 4; ++j) f[j] = p[j];
#pragma unroll
    for (int j = 0; j < N / 4; ++j) acc += q[4 * j] * f[j].x + q[4 * j + 1] * f[j].y + q[4 * j + 2] * f[j].z + q[4 * j + 3] * f[j].w;
  }
  return acc;
}

// q . key over n elements; q in shared memory. 16-byte loads where the row allows them.
__device__ float dot_row(const float* q, bool f16, const void* base, int64_t off, int64_t n) {
  if (n == 64 && off % 8 == 0) return dot_row_fixed<64>(q, f16, base, off);
  if (n == 128 && off % 8 == 0) return dot_row_fixed<128>(q, f16, base, off);
  float acc = 0.0f;
  if (f16 && n % 8 == 0 && off % 8 == 0) {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + off);
    for (int64_t j = 0; j < n / 8; ++j) {
      const uint4 u = p[j];
      const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        acc += q[8 * j + 2 * i] * f.x + q[8 * j + 2 * i + 1] * f.y;
      }
    }
  } else if (!f16 && n % 4 == 0 && off % 4 == 0) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + off);
    for (int64_t j = 0; j < n / 4; ++j) {
      const float4 f = p[j];
      acc += q[4 * j] * f.x + q[4 * j + 1] * f.y + q[4 * j + 2] * f.z + q[4 * j + 3] * f.w;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) acc += q[j] * load_kv(f16, base, off + j);
  }
  return acc;
}

// NV: value elements per lane (dv <= 32 * NV). partial: null when the grid has one split.
template <int NV>
__global__ void __launch_bounds__(kWarps * 32) attention_rows_kernel(AttentionRows a, int64_t chunk, float* partial) {
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
      const int64_t k_off = slot >= 0 ? (slot * a.hkv + g) * a.dk : ((b * a.hkv + g) * a.lk + t) * a.dk;
      float dot = dot_row(qs, a.kv_f16, a.k, k_off, a.dk);
      if (a.ds > 0) dot += dot_row(qs + a.dk, a.kv_f16, a.k_shared, slot >= 0 ? slot * a.ds : (b * a.lk + t) * a.ds, a.ds);
      s = dot * a.scale;
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
        const int64_t v_off = sj >= 0 ? (sj * a.hkv + g) * a.dv : ((b * a.hkv + g) * a.lk + t0 + j) * a.dv;
#pragma unroll
        for (int c = 0; c < NV; ++c) {
          const int64_t e = lane + 32 * c;
          vj[u][c] = e < a.dv ? load_kv(a.kv_f16, a.v, v_off + e) : 0.0f;
        }
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
    else a.out[row * a.dv + e] = o / total;  // no visible key: 0/0, as the CPU kernel and the oracle
  }
  if (dst != nullptr && threadIdx.x == 0) {
    dst[a.dv] = mx;
    dst[a.dv + 1] = total;
  }
}

// One block per row: the splits' partials merged as one softmax.
__global__ void merge_splits_kernel(const float* partial, int splits, int64_t dv, float* out) {
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
    out[static_cast<int64_t>(blockIdx.x) * dv + e] = o / total;
  }
}

}  // namespace

AttentionSplit attention_rows_split(const AttentionRows& a, int sms) {
  const int64_t rows = a.batch * a.hq * a.lq, target = 2 * static_cast<int64_t>(sms);  // two waves
  AttentionSplit s;
  if (rows >= target || a.lk <= 256) return AttentionSplit{1, a.lk, 0};
  const int64_t most = (a.lk + 127) / 128;  // at least 128 keys per split
  s.splits = static_cast<int>(std::min<int64_t>(most, (target + rows - 1) / rows));
  s.chunk = (a.lk + s.splits - 1) / s.splits;
  s.workspace_floats = rows * s.splits * (a.dv + 2);
  return s;
}

void attention_rows(const AttentionRows& a, const AttentionSplit& split, float* workspace, const Launch& l) {
  const int64_t rows = a.batch * a.hq * a.lq;
  if (rows == 0) return;
  const size_t smem = static_cast<size_t>(a.dk + a.ds + kWarps * (a.dv + 2)) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(split.splits));
  float* partial = split.splits > 1 ? workspace : nullptr;
  cudaStream_t s = stream_of(l);
  if (a.dv <= 64) attention_rows_kernel<2><<<grid, kWarps * 32, smem, s>>>(a, split.chunk, partial);
  else if (a.dv <= 256) attention_rows_kernel<8><<<grid, kWarps * 32, smem, s>>>(a, split.chunk, partial);
  else attention_rows_kernel<32><<<grid, kWarps * 32, smem, s>>>(a, split.chunk, partial);
  if (partial != nullptr) merge_splits_kernel<<<static_cast<unsigned>(rows), 128, 0, s>>>(partial, split.splits, a.dv, a.out);
}

}  // namespace kvf::exec::cuda::step
