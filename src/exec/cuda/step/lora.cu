// LoRA terms (kernels.h's lora): every row's A x, a warp per (row, rank index), then
// y + s * (A x)ᵀ Bᵀ, a thread per output element. A row of adapter 0 (the base model) copies
// y. The ids come from the step's slot, read on the device: one captured graph serves any mix.
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32) lora_down(LoraRows a) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (w >= a.rows * a.rank) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = w / a.rank, j = w % a.rank, id = a.ids[t];
  float acc = 0.0f;
  if (id != 0) {
    const float* ar = a.a + (id * a.rank + j) * a.in;
    const float* xr = a.x + t * a.in;
    for (int64_t c = lane; c < a.in; c += 32) acc += ar[c] * xr[c];
  }
  acc = warp_sum(acc);
  if (lane == 0) a.scratch[w] = acc;
}

__global__ void lora_up(LoraRows a) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.rows * a.out;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / a.out, c = i % a.out, id = a.ids[t];
    if (id == 0) {
      a.result[i] = a.y[i];
      continue;
    }
    const float* bt = a.b + id * a.rank * a.out + c;  // column c of Bᵀ [rank, out]: a warp reads whole rows
    const float* ax = a.scratch + t * a.rank;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.rank; ++j) acc += ax[j] * bt[j * a.out];
    a.result[i] = __fadd_rn(a.y[i], __fmul_rn(acc, a.s[id]));  // rounded, then added: the chain's Mul and Add
  }
}

}  // namespace

void lora(const LoraRows& a, const Launch& l) {
  if (a.rows == 0 || a.out == 0) return;
  cudaStream_t s = stream_of(l);
  const int64_t warps = a.rows * a.rank;
  if (warps > 0) lora_down<<<static_cast<unsigned>((warps + kWarps - 1) / kWarps), kWarps * 32, 0, s>>>(a);
  lora_up<<<blocks_for(a.rows * a.out), kThreads, 0, s>>>(a);
}

}  // namespace kvf::exec::cuda::step
