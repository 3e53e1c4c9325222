// LoRA terms (kernels.h's lora): every row's A x, a block per (row, rank index), then
// y + s * (A x)ᵀ Bᵀ, a thread per output element. A row of adapter 0 (the base model) copies
// y. The ids come from the step's slot, read on the device: one captured graph serves any mix.
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

// Warps of a block of lora_down: one (row, rank index) a block, so a decode's few rows still
// spread their A rows over as many SMs as the rank has entries.
constexpr int kWarps = 4;

__device__ __forceinline__ float factor(float v) { return v; }
__device__ __forceinline__ float factor(__half v) { return __half2float(v); }

template <class T>
__global__ void __launch_bounds__(kWarps * 32) lora_down(LoraRows a) {
  const int64_t w = blockIdx.x;  // (row, rank index)
  const int64_t t = w / a.rank, j = w % a.rank, id = a.ids[t];
  __shared__ float part[kWarps];
  float acc = 0.0f;
  if (id != 0) {
    const T* ar = static_cast<const T*>(a.a) + (id * a.rank + j) * a.in;
    const float* xr = a.x + t * a.in;
    for (int64_t c = threadIdx.x; c < a.in; c += kWarps * 32) acc += factor(ar[c]) * xr[c];
  }
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int k = 0; k < kWarps; ++k) sum += part[k];
    a.scratch[w] = sum;
  }
}

template <class T>
__global__ void lora_up(LoraRows a) {
  for (const int64_t i : grid_stride(a.rows * a.out)) {
    const int64_t t = i / a.out, c = i % a.out, id = a.ids[t];
    if (id == 0) {
      a.result[i] = a.y[i];
      continue;
    }
    const T* bt = static_cast<const T*>(a.b) + id * a.rank * a.out + c;  // column c of Bᵀ [rank, out]: a warp reads whole rows
    const float* ax = a.scratch + t * a.rank;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.rank; ++j) acc += ax[j] * factor(bt[j * a.out]);
    a.result[i] = __fadd_rn(a.y[i], __fmul_rn(acc, a.s[id]));  // rounded, then added: the chain's Mul and Add
  }
}

template <class T>
void lora_with(const LoraRows& a, cudaStream_t s) {
  const int64_t blocks = a.rows * a.rank;
  if (blocks > 0) lora_down<T><<<static_cast<unsigned>(blocks), kWarps * 32, 0, s>>>(a);
  lora_up<T><<<blocks_for(a.rows * a.out), kThreads, 0, s>>>(a);
}

}  // namespace

void lora(const LoraRows& a, const Launch& l) {
  if (a.rows == 0 || a.out == 0) return;
  if (a.factors == DType::kF16) {
    lora_with<__half>(a, stream_of(l));
  } else {
    lora_with<float>(a, stream_of(l));
  }
}

}  // namespace kvf::exec::cuda::step
