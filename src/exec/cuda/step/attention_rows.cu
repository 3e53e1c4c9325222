// The fused Attention op's whole contract on the GPU (exec/cpu/attention.h): dense or paged
// keys, f32 or f16 K/V, a split (shared) key, an additive mask of any broadcast, a live
// length and a softcap. One block per query row; its warps take every fourth key and keep an
// online softmax, merged at the end. The general path every request can take; the decode and
// prefill kernels of exec/cuda serve the shapes they cover.
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kWarps = 4;

__device__ float load_kv(bool f16, const void* p, int64_t i) {
  return f16 ? __half2float(static_cast<const __half*>(p)[i]) : static_cast<const float*>(p)[i];
}

// NV: value elements per lane (dv <= 32 * NV).
template <int NV>
__global__ void __launch_bounds__(kWarps * 32) attention_rows_kernel(AttentionRows a) {
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
  const float* mrow = nullptr;
  if (a.mask != nullptr) {
    const int64_t mb = a.mask_batch == 1 ? 0 : b, mh = a.mask_heads == 1 ? 0 : h;
    mrow = a.mask + ((mb * a.mask_heads + mh) * a.lq + i) * a.lk;
  }
  float m = -INFINITY, l = 0.0f, acc[NV] = {};
  for (int64_t t = warp; t < keys; t += kWarps) {
    const int64_t slot = a.read != nullptr ? a.read[b * a.lk + t] : -1;
    const int64_t k_off = slot >= 0 ? (slot * a.hkv + g) * a.dk : ((b * a.hkv + g) * a.lk + t) * a.dk;
    const int64_t v_off = slot >= 0 ? (slot * a.hkv + g) * a.dv : ((b * a.hkv + g) * a.lk + t) * a.dv;
    float dot = 0.0f;
    for (int64_t j = lane; j < a.dk; j += 32) dot += qs[j] * load_kv(a.kv_f16, a.k, k_off + j);
    if (a.ds > 0) {
      const int64_t s_off = slot >= 0 ? slot * a.ds : (b * a.lk + t) * a.ds;
      for (int64_t j = lane; j < a.ds; j += 32) dot += qs[a.dk + j] * load_kv(a.kv_f16, a.k_shared, s_off + j);
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    float s = dot * a.scale;
    if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
    if (mrow != nullptr) s += mrow[t];
    if (s == -INFINITY) continue;  // a masked key adds exactly nothing
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int64_t j = lane + 32 * c;
      if (j < a.dv) acc[c] = acc[c] * corr + p * load_kv(a.kv_f16, a.v, v_off + j);
    }
    m = m_new;
  }
  float* mine = part + warp * (a.dv + 2);
#pragma unroll
  for (int c = 0; c < NV; ++c) {
    const int64_t j = lane + 32 * c;
    if (j < a.dv) mine[j] = acc[c];
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
  for (int64_t j = threadIdx.x; j < a.dv; j += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float mw = part[w * (a.dv + 2) + a.dv];
      if (mw != -INFINITY) o += part[w * (a.dv + 2) + j] * expf(mw - mx);
    }
    a.out[row * a.dv + j] = o / total;  // no visible key: 0/0, as the CPU kernel and the oracle
  }
}

}  // namespace

void attention_rows(const AttentionRows& a, const Launch& l) {
  const int64_t rows = a.batch * a.hq * a.lq;
  if (rows == 0) return;
  const size_t smem = static_cast<size_t>(a.dk + a.ds + kWarps * (a.dv + 2)) * sizeof(float);
  const auto grid = static_cast<unsigned>(rows);
  cudaStream_t s = stream_of(l);
  if (a.dv <= 64) attention_rows_kernel<2><<<grid, kWarps * 32, smem, s>>>(a);
  else if (a.dv <= 256) attention_rows_kernel<8><<<grid, kWarps * 32, smem, s>>>(a);
  else attention_rows_kernel<32><<<grid, kWarps * 32, smem, s>>>(a);
}

}  // namespace kvf::exec::cuda::step
