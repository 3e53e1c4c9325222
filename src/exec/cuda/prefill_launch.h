// The boundary between the prefill host API (prefill_attention.cpp, g++) and the prefill
// kernels (prefill_attention_d*.cu, nvcc): raw parameters and one launcher per head dim.
// Plain C++, no CUDA headers. The decode kernels have their own boundary (decode_launch.h).
#pragma once

#include <cstdint>

namespace kvf::exec::cuda::detail {

// Everything a prefill launch reads; pointers are device pointers, 16-bit data bf16 or f16.
struct PrefillParams {
  const void* q;             // [total_q, Hq, d]
  const void* k;             // [total_k, Hkv, d]
  const void* v;             // [total_k, Hkv, d]
  void* out;                 // [total_q, Hq, d]
  const int32_t* cu_q;       // [B + 1] cumulative query lengths
  const int32_t* cu_k;       // [B + 1] cumulative key lengths
  int batch, hq, hkv, n_rep, max_seqlen_q;
  int total_q, total_k;      // rows of q/out and of k/v (the wgmma kernel's TMA maps)
  float scale_log2;          // softmax scale * log2(e)
  float scale, softcap;      // softcap 0: none
  float inv_softcap;         // 1 / softcap (0 without): no division in the kernels
  const float* alibi;        // [Hq] slopes or null
  int window;                // 0: none
  int causal;                // 0/1, bottom-right aligned
  int f16;                   // 0: bf16, 1: f16
};

// The step executor's layouts (exec/cuda/step): q and out f32 [B, Hq, Lq, d], K/V a dense
// 16-bit cache [B, Hkv, cap, d] of which sequence b's first lens[b] keys are live; query row i
// of sequence b sees key t when t <= pos[b * Lq + i] (its position), whatever the order of the
// positions. Strides in elements. The scalar fields of PrefillParams that the step uses:
// batch, hq, hkv, n_rep, max_seqlen_q (= Lq), scale_log2, scale, softcap, inv_softcap, f16;
// q, k, v, out point at the step's buffers; cu_q, cu_k, alibi are null and window 0.
struct StepPrefillParams {
  PrefillParams p;
  const int32_t* lens;  // [B]
  const int32_t* pos;   // [B * Lq]
  int cap;              // keys per cache row: lens are clamped to it
  int64_t q_row, q_head, q_batch;  // of q and out
  int64_t k_row, k_head, k_batch;  // of k and v
};

// The same kernels over a step's buffers, one launcher per head dim. Return a cudaError_t.
int launch_step_prefill_d64(const StepPrefillParams& s, void* stream);
int launch_step_prefill_d128(const StepPrefillParams& s, void* stream);
int launch_step_prefill_d256(const StepPrefillParams& s, void* stream);

// Launch the prefill kernel for one head dim. Returns a cudaError_t.
int launch_prefill_d64(const PrefillParams& p, void* stream);
int launch_prefill_d128(const PrefillParams& p, void* stream);
int launch_prefill_d256(const PrefillParams& p, void* stream);
// Head dim 64, 128 or 256 on wgmma (prefill_attention_sm90a.cu); the device must be sm_90.
int launch_prefill_wgmma(const PrefillParams& p, int head_dim, void* stream);

}  // namespace kvf::exec::cuda::detail
