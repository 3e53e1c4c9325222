// The element-wise pieces of a pack's tasks (kernels.h, "small ops in one launch"): pack.cu
// walks each task's elements with them, and the one-row linear's epilogue (gemv_bulk.cuh)
// runs a decode step's ropes and cache writes with them as it stores q, k and v.
#pragma once

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step::pack_detail {

__device__ inline void store(DType to, void* out, int64_t i, float v) {
  switch (to) {
    case DType::kF16: static_cast<__half*>(out)[i] = __float2half_rn(v); return;
    case DType::kBF16: static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v); return;
    default: static_cast<float*>(out)[i] = v; return;
  }
}

// Where element u of the update lands in the cache.
__device__ inline int64_t slice_index(const SliceTask& s, int32_t start, int64_t u) {
  const int64_t o = u / (s.n * s.inner), rest = u % (s.n * s.inner);
  return (o * s.extent + start) * s.inner + rest;
}

// The cache write's checks (update_slice_kernel's): false when it must write nothing. A
// thread with `report` set records an out-of-range start.
__device__ inline bool slice_allowed(const SliceTask& s, int32_t start, bool report, FaultRecord* f) {
  if (start < 0 || start + s.n > s.extent) {
    if (report) raise_fault(f, DeviceFault::kUpdateOverflow, s.eqn, start);
    return false;
  }
  return !faulted(f);
}

// cos and sin of pair j (of rotary / 2) in rope row `row`.
__device__ inline float2 rope_angle(const RopeTask& r, int64_t row, int64_t j) {
  const int64_t at = (row / r.every % r.t_len) * (r.rotary / 2) + j;
  return make_float2(r.cos[at], r.sin[at]);
}

// Element u of a rope with interleaved pairs (u and u ^ 1), from its input x_u and its pair's.
__device__ inline float rope_interleaved(const RopeTask& r, int64_t u, float x_u, float x_pair) {
  const int64_t c = u % r.d;
  if (c >= r.rotary) return x_u;  // the pass-through tail
  const float2 cs = rope_angle(r, u / r.d, c / 2);
  return c % 2 == 0 ? x_u * cs.x - x_pair * cs.y : x_u * cs.x + x_pair * cs.y;
}

// Every task of `then` that reads element u of `src` (x_u; its rope pair x_pair), done for
// that element: the tasks pack_in_epilogue (kernels.h) admits.
__device__ inline void then_element(const Pack& then, const float* src, int64_t u, float x_u, float x_pair, FaultRecord* f) {
  for (int t = 0; t < then.tasks; ++t) {
    const PackTask& task = then.task[t];
    const bool roped = task.kind == PackKind::kRope || task.kind == PackKind::kRopeIntoSlice ||
                       task.kind == PackKind::kRopeIntoScatter;
    if (roped ? task.rope.x != src : (task.kind == PackKind::kSlice ? task.slice.upd : task.scatter.upd) != src) continue;
    const float v = roped ? rope_interleaved(task.rope, u, x_u, x_pair) : x_u;
    switch (task.kind) {
      case PackKind::kRope: task.rope.out[u] = v; break;
      case PackKind::kRopeIntoSlice:
      case PackKind::kSlice: {
        const SliceTask& s = task.slice;
        const int32_t start = *s.start;
        if (slice_allowed(s, start, u == 0, f)) store(s.to, s.out, slice_index(s, start, u), v);
        break;
      }
      case PackKind::kRopeIntoScatter:
      case PackKind::kScatter: {
        const ScatterTask& s = task.scatter;
        const int32_t r = faulted(f) ? -1 : s.idx[u / s.row];
        if (r >= 0) store(s.to, s.out, r * s.row + u % s.row, v);
        break;
      }
    }
  }
}

}  // namespace kvf::exec::cuda::step::pack_detail
