// Row kernels: reductions, RMSNorm and softmax, one block per row with a block-wide
// reduction (f32 sums accumulate in f32 per thread, then in a fixed tree: deterministic).
#include <cfloat>

#include "exec/cuda/step/block_argmax.cuh"
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kRowThreads = 256;

__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, v, o);
    v = y > v || y != y ? y : v;
  }
  return v;
}

// The block's sum (or max) of v, returned to every thread.
__device__ float block_reduce(float v, bool is_max) {
  __shared__ float part[kRowThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // part may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float r = is_max ? -INFINITY : 0.0f;
  for (int i = 0; i < kRowThreads / 32; ++i) r = is_max ? (part[i] > r || part[i] != part[i] ? part[i] : r) : r + part[i];
  return r;
}

// x as [outer, red, inner]; one block per (outer, inner) output.
__global__ void reduce_f32_kernel(bool is_max, const float* x, float* out, int64_t red, int64_t inner) {
  const int64_t o = blockIdx.x / inner, in = blockIdx.x % inner;
  const float* base = x + o * red * inner + in;
  float acc = is_max ? -INFINITY : 0.0f;
  for (int64_t r = threadIdx.x; r < red; r += blockDim.x) {
    const float v = base[r * inner];
    acc = is_max ? (v > acc || v != v ? v : acc) : acc + v;
  }
  acc = block_reduce(acc, is_max);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__global__ void reduce_i32_kernel(bool is_max, const int32_t* x, int32_t* out, int64_t red, int64_t inner) {
  const int64_t o = blockIdx.x / inner, in = blockIdx.x % inner;
  if (threadIdx.x != 0) return;  // integer reductions are index arithmetic: short and rare
  const int32_t* base = x + o * red * inner + in;
  int64_t acc = is_max ? INT64_MIN : 0;
  for (int64_t r = 0; r < red; ++r) acc = is_max ? max(acc, static_cast<int64_t>(base[r * inner])) : acc + base[r * inner];
  out[blockIdx.x] = static_cast<int32_t>(acc);
}

__device__ void store(float* o, float v) { *o = v; }
__device__ void store(__half* o, float v) { *o = __float2half_rn(v); }
__device__ void store(__nv_bfloat16* o, float v) { *o = __float2bfloat16_rn(v); }

// Out: f32, or a 16-bit type the f32 result is rounded to (the tensor cores' x).
template <typename Out>
__global__ void rmsnorm_kernel(const float* x, const float* w, Out* out, int64_t d, double eps, bool unit_offset) {
  const float* xr = x + blockIdx.x * d;
  Out* o = out + blockIdx.x * d;
  float ss = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_reduce(ss, false);
  const float inv = inv_rms(ss, d, eps);
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) store(o + c, xr[c] * inv * (unit_offset ? 1.0f + w[c] : w[c]));
}

// The same over rows that fit the block's registers as float4s (d % 4 == 0, at most
// kRowVecs of them a thread, 16-byte aligned): every load of x and w is issued before the
// first is used and x is read once. The loop above waits out one memory latency an element
// a thread (d / 256 of them in a row), twice: a 64-row step's 2048-wide norm took 6.3 us
// there and 2.8 here (ncu, in the step).
constexpr int kRowVecs = 8;

// Launched as a programmatic dependent (the rounding of a linear group's x: the linear
// behind it requests its first weights while this runs).
template <typename Out>
__global__ void rmsnorm_rows_kernel(const float* x, const float* w, Out* out, int64_t d, double eps, bool unit_offset) {
  await_kernel_in_front();
  const auto* xr = reinterpret_cast<const float4*>(x + blockIdx.x * d);
  const auto* w4 = reinterpret_cast<const float4*>(w);
  const int64_t n4 = d / 4;
  float4 v[kRowVecs], g[kRowVecs];
  float ss = 0;
#pragma unroll
  for (int i = 0; i < kRowVecs; ++i) {
    const int64_t c = threadIdx.x + i * kRowThreads;
    v[i] = c < n4 ? xr[c] : make_float4(0, 0, 0, 0);
    g[i] = c < n4 ? w4[c] : make_float4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kRowVecs; ++i) ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  ss = block_reduce(ss, false);
  const float inv = inv_rms(ss, d, eps);
  const float one = unit_offset ? 1.0f : 0.0f;
  Out* o = out + blockIdx.x * d;
#pragma unroll
  for (int i = 0; i < kRowVecs; ++i) {
    const int64_t c = threadIdx.x + i * kRowThreads;
    if (c >= n4) break;
    store(o + 4 * c, v[i].x * inv * (one + g[i].x));
    store(o + 4 * c + 1, v[i].y * inv * (one + g[i].y));
    store(o + 4 * c + 2, v[i].z * inv * (one + g[i].z));
    store(o + 4 * c + 3, v[i].w * inv * (one + g[i].w));
  }
}

template <typename Out>
void launch_rmsnorm(const float* x, const float* w, Out* out, int64_t rows, int64_t d, double eps, bool unit_offset,
                    cudaStream_t s) {
  const auto grid = static_cast<unsigned>(rows);
  const bool vectors = d % 4 == 0 && d <= 4 * kRowThreads * kRowVecs && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (vectors) launch_programmatic(rmsnorm_rows_kernel<Out>, dim3(grid), dim3(kRowThreads), 0, s, true, x, w, out, d, eps, unit_offset);
  else rmsnorm_kernel<<<grid, kRowThreads, 0, s>>>(x, w, out, d, eps, unit_offset);
}

__global__ void softmax_kernel(const float* x, float* out, int64_t d) {
  const float* xr = x + blockIdx.x * d;
  float* o = out + blockIdx.x * d;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce(m, true);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) sum += expf(xr[c] - m);
  sum = block_reduce(sum, false);
  const float inv = 1.0f / sum;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) o[c] = expf(xr[c] - m) * inv;
}

// One block a row (block_argmax.cuh).
__global__ void row_argmax_kernel(const float* x, int64_t d, int32_t* out) {
  const int32_t at = block_argmax<kRowThreads>(x + blockIdx.x * d, d);
  if (threadIdx.x == 0) out[blockIdx.x] = at;
}

}  // namespace

void row_argmax(const float* x, int64_t rows, int64_t d, int32_t* out, const Launch& l) {
  if (rows == 0) return;
  row_argmax_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream_of(l)>>>(x, d, out);
}

void reduce(bool is_max, DType dt, const void* x, void* out, int64_t outer, int64_t red, int64_t inner,
            const Launch& l) {
  const auto grid = static_cast<unsigned>(outer * inner);
  if (grid == 0) return;
  if (dt == DType::kI32) {
    reduce_i32_kernel<<<grid, 32, 0, stream_of(l)>>>(is_max, static_cast<const int32_t*>(x), static_cast<int32_t*>(out), red, inner);
  } else {
    reduce_f32_kernel<<<grid, kRowThreads, 0, stream_of(l)>>>(is_max, static_cast<const float*>(x), static_cast<float*>(out), red, inner);
  }
}

void rmsnorm(const float* x, const float* w, float* out, int64_t rows, int64_t d, double eps, bool unit_offset,
             const Launch& l) {
  if (rows == 0) return;
  launch_rmsnorm(x, w, out, rows, d, eps, unit_offset, stream_of(l));
}

void rmsnorm_to_half(const float* x, const float* w, void* out, DType half, int64_t rows, int64_t d, double eps,
                     bool unit_offset, const Launch& l) {
  if (rows == 0) return;
  if (half == DType::kBF16) {
    launch_rmsnorm(x, w, static_cast<__nv_bfloat16*>(out), rows, d, eps, unit_offset, stream_of(l));
  } else {
    launch_rmsnorm(x, w, static_cast<__half*>(out), rows, d, eps, unit_offset, stream_of(l));
  }
}

void softmax(const float* x, float* out, int64_t rows, int64_t d, const Launch& l) {
  if (rows == 0) return;
  softmax_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream_of(l)>>>(x, out, d);
}

}  // namespace kvf::exec::cuda::step
