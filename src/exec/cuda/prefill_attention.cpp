// The prefill host API: argument checks and the launch (the kernel: prefill_attention.cuh).
#include <cuda_runtime.h>

#include <cmath>

#include "exec/cuda/attention.h"
#include "exec/cuda/device_props.h"
#include "exec/cuda/prefill_launch.h"

namespace kvf::exec::cuda {
namespace {

constexpr float kLog2eHost = 1.4426950408889634f;  // the kernels' scores live in the log2 domain

// Softcap, ALiBi or a window: the per-score pass the wgmma kernel does not have.
bool has_score_mods(const PrefillAttentionArgs& a) { return a.softcap > 0.0f || a.alibi != nullptr || a.window > 0; }

// What both forms of a launch fill alike: the buffers, the heads, the score transform (the
// scale also in the log2 domain, the softcap's reciprocal) and the 16-bit type.
void set_common(detail::PrefillParams& p, KvType type, const void* q, const void* k, const void* v, void* out, int batch,
                int hq, int hkv, float scale, float softcap) {
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.batch = batch;
  p.hq = hq;
  p.hkv = hkv;
  p.n_rep = hq / hkv;
  p.scale_log2 = scale * kLog2eHost;
  p.scale = scale;
  p.softcap = softcap;
  p.inv_softcap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  p.f16 = type == KvType::kF16 ? 1 : 0;
}

}  // namespace

Status check_prefill_attention(const PrefillAttentionArgs& a) {
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256)
    return unsupported("cuda prefill_attention: head_dim ", a.head_dim, "; supported: 64, 128, 256");
  if (a.batch < 1 || a.q_heads < 1 || a.kv_heads < 1 || a.q_heads % a.kv_heads != 0)
    return invalid_input("cuda prefill_attention: batch ", a.batch, ", q_heads ", a.q_heads, ", kv_heads ",
                         a.kv_heads, " (q_heads must be a positive multiple of kv_heads)");
  if (a.batch > 65535 || a.q_heads > 65535)
    return unsupported("cuda prefill_attention: batch/q_heads over the grid limit 65535");
  if (!a.q || !a.k || !a.v || !a.out || !a.cu_seqlens_q || !a.cu_seqlens_k)
    return invalid_input("cuda prefill_attention: q, k, v, out, cu_seqlens_q and cu_seqlens_k must be set");
  if (!detail::aligned(a.q, 16) || !detail::aligned(a.k, 16) || !detail::aligned(a.v, 16) || !detail::aligned(a.out, 16))
    return invalid_input("cuda prefill_attention: q, k, v and out must be 16-byte aligned (the kernels copy 16-byte rows)");
  if (a.max_seqlen_q < 0) return invalid_input("cuda prefill_attention: max_seqlen_q ", a.max_seqlen_q);
  if (!(a.scale > 0.0f) || !std::isfinite(a.scale))
    return invalid_input("cuda prefill_attention: scale ", a.scale, " (must be finite and > 0)");
  if (!(a.softcap >= 0.0f) || !std::isfinite(a.softcap) || a.window < 0)
    return invalid_input("cuda prefill_attention: softcap ", a.softcap, ", window ", a.window, " (must be >= 0)");
  if (a.kernel == PrefillKernel::kWgmma && !detail::is_sm90())
    return unsupported("cuda prefill_attention: the wgmma kernel needs an sm_90 (Hopper) device");
  if (a.total_q < 0 || a.total_k < 0 || (a.total_q > 0 && a.total_q < a.max_seqlen_q))
    return invalid_input("cuda prefill_attention: total_q ", a.total_q, ", total_k ", a.total_k,
                         " (rows of q and k; total_q >= max_seqlen_q)");
  if (a.kernel == PrefillKernel::kWgmma && has_score_mods(a))
    return unsupported("cuda prefill_attention: the wgmma kernel has no softcap, ALiBi or window (mma.sync has)");
  if (a.kernel == PrefillKernel::kWgmma && a.total_q == 0 && a.max_seqlen_q > 0)
    return invalid_input("cuda prefill_attention: the wgmma kernel needs total_q and total_k (its TMA maps)");
  return Status();
}

PrefillKernel prefill_kernel_for(const PrefillAttentionArgs& a) {
  if (a.kernel != PrefillKernel::kAuto) return a.kernel;
  return a.total_q > 0 && !has_score_mods(a) && detail::is_sm90() ? PrefillKernel::kWgmma : PrefillKernel::kMmaSync;
}

Status prefill_attention(const PrefillAttentionArgs& a, void* stream) {
  if (Status s = check_prefill_attention(a); !s) return s;
  detail::PrefillParams p{};
  set_common(p, a.kv_type, a.q, a.k, a.v, a.out, a.batch, a.q_heads, a.kv_heads, a.scale, a.softcap);
  p.cu_q = a.cu_seqlens_q;
  p.cu_k = a.cu_seqlens_k;
  p.max_seqlen_q = a.max_seqlen_q;
  p.total_q = a.total_q;
  p.total_k = a.total_k;
  p.alibi = a.alibi;
  p.window = a.window;
  p.causal = a.causal ? 1 : 0;
  int rc = 0;
  if (prefill_kernel_for(a) == PrefillKernel::kWgmma) rc = detail::launch_prefill_wgmma(p, a.head_dim, stream);
  else if (a.head_dim == 64) rc = detail::launch_prefill_d64(p, stream);
  else if (a.head_dim == 128) rc = detail::launch_prefill_d128(p, stream);
  else rc = detail::launch_prefill_d256(p, stream);
  if (rc != 0)
    return internal_error("cuda prefill_attention: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(rc)));
  return Status();
}

Status check_step_prefill_attention(const StepPrefillArgs& a) {
  if (a.head_dim != 64 && a.head_dim != 128 && a.head_dim != 256) {
    return unsupported("cuda step prefill: head dim ", a.head_dim, " (the kernels take 64, 128, 256)");
  }
  if (a.batch < 1 || a.q_heads < 1 || a.kv_heads < 1 || a.q_heads % a.kv_heads != 0 || a.lq < 1 || a.cap < 1) {
    return Error(ErrorCode::kInvalidInput, "cuda step prefill: bad shape");
  }
  if (a.batch > 65535 || a.q_heads > 65535) return unsupported("cuda step prefill: batch/q_heads over the grid limit 65535");
  if (!a.q || !a.k || !a.v || !a.out || !a.lens || !a.pos) return Error(ErrorCode::kInvalidInput, "cuda step prefill: null pointer");
  return Status();
}

Status step_prefill_attention(const StepPrefillArgs& a, void* stream) {
  detail::StepPrefillParams s{};
  set_common(s.p, a.kv_type, a.q, a.k, a.v, a.out, a.batch, a.q_heads, a.kv_heads, a.scale, a.softcap);
  s.p.max_seqlen_q = a.lq;
  s.p.causal = 1;
  s.lens = a.lens;
  s.pos = a.pos;
  s.cap = a.cap;
  const int64_t d = a.head_dim;
  s.q_row = d;
  s.q_head = a.lq * d;
  s.q_batch = a.q_heads * s.q_head;
  s.k_row = d;
  s.k_head = a.cap * d;
  s.k_batch = a.kv_heads * s.k_head;
  int rc = a.head_dim == 64    ? detail::launch_step_prefill_d64(s, stream)
           : a.head_dim == 128 ? detail::launch_step_prefill_d128(s, stream)
                               : detail::launch_step_prefill_d256(s, stream);
  if (rc != 0) return internal_error("cuda step prefill: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(rc)));
  return Status();
}

}  // namespace kvf::exec::cuda
