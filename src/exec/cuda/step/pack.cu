// Small independent ops in one launch (kernels.h, "small ops in one launch"): each task
// takes a contiguous range of the grid's blocks and walks its elements with a stride of its
// own block count, as its single kernel (rope_kernel, update_slice_kernel) would.
#include <algorithm>

#include "exec/cuda/step/pack_ops.cuh"

namespace kvf::exec::cuda::step {
namespace {

using pack_detail::slice_allowed;
using pack_detail::slice_index;
using pack_detail::store;

struct PackLaunch {
  Pack p;
  int64_t first[kPackTasks + 1];  // task t runs on blocks [first[t], first[t + 1])
};

// The rope's output elements [begin, ...) by `step`, each handed to put(u, value) with u its
// flat index in the rope's output.
template <class Put>
__device__ void rope_elements(const RopeTask& r, int64_t begin, int64_t step, Put put) {
  const int64_t half = r.rotary / 2, per_row = half + (r.d - r.rotary);
  for (int64_t i = begin; i < r.rows * per_row; i += step) {
    const int64_t row = i / per_row, j = i % per_row;
    const float* xr = r.x + row * r.d;
    if (j >= half) {  // the pass-through tail
      const int64_t c = r.rotary + (j - half);
      put(row * r.d + c, xr[c]);
      continue;
    }
    const float2 cs = pack_detail::rope_angle(r, row, j);
    const float c = cs.x, s = cs.y;
    const int64_t i0 = r.interleaved ? 2 * j : j, i1 = r.interleaved ? 2 * j + 1 : j + half;
    const float a = xr[i0], b = xr[i1];
    put(row * r.d + i0, a * c - b * s);
    put(row * r.d + i1, b * c + a * s);
  }
}

// Launched as a programmatic dependent (PDL): waits for the kernel in front before reading
// what it wrote, and lets the one after it (the decode) launch early.
__global__ void pack_kernel(PackLaunch pl, FaultRecord* fault) {
  await_kernel_in_front();
  int t = 0;
  while (t + 1 < pl.p.tasks && static_cast<int64_t>(blockIdx.x) >= pl.first[t + 1]) ++t;
  const PackTask& task = pl.p.task[t];
  const int64_t block = blockIdx.x - pl.first[t], blocks = pl.first[t + 1] - pl.first[t];
  const int64_t begin = block * blockDim.x + threadIdx.x, step = blocks * blockDim.x;
  switch (task.kind) {
    case PackKind::kRope: {
      float* out = task.rope.out;
      rope_elements(task.rope, begin, step, [&](int64_t u, float v) { out[u] = v; });
      return;
    }
    case PackKind::kRopeIntoSlice: {
      const SliceTask& s = task.slice;
      const int32_t start = *s.start;
      if (!slice_allowed(s, start, block == 0 && threadIdx.x == 0, fault)) return;
      rope_elements(task.rope, begin, step, [&](int64_t u, float v) { store(s.to, s.out, slice_index(s, start, u), v); });
      return;
    }
    case PackKind::kSlice: {
      const SliceTask& s = task.slice;
      const int32_t start = *s.start;
      if (!slice_allowed(s, start, block == 0 && threadIdx.x == 0, fault)) return;
      for (int64_t u = begin; u < s.outer * s.n * s.inner; u += step) {
        const int64_t at = slice_index(s, start, u);
        if (s.rounded) store(s.to, s.out, at, static_cast<const float*>(s.upd)[u]);
        else if (s.to == DType::kF32) static_cast<uint32_t*>(s.out)[at] = static_cast<const uint32_t*>(s.upd)[u];
        else static_cast<uint16_t*>(s.out)[at] = static_cast<const uint16_t*>(s.upd)[u];
      }
      return;
    }
    case PackKind::kScatter: {  // an earlier launch checked the slots; a fault there writes nothing
      const ScatterTask& s = task.scatter;
      if (faulted(fault)) return;
      for (int64_t u = begin; u < s.m * s.row; u += step) {
        const int32_t r = s.idx[u / s.row];
        if (r < 0) continue;
        const int64_t at = r * s.row + u % s.row;
        if (s.rounded) store(s.to, s.out, at, static_cast<const float*>(s.upd)[u]);
        else if (s.to == DType::kF32) static_cast<uint32_t*>(s.out)[at] = static_cast<const uint32_t*>(s.upd)[u];
        else static_cast<uint16_t*>(s.out)[at] = static_cast<const uint16_t*>(s.upd)[u];
      }
      return;
    }
    case PackKind::kRopeIntoScatter: {
      const ScatterTask& s = task.scatter;
      if (faulted(fault)) return;
      rope_elements(task.rope, begin, step, [&](int64_t u, float v) {
        const int32_t r = s.idx[u / s.row];
        if (r >= 0) store(s.to, s.out, r * s.row + u % s.row, v);
      });
      return;
    }
  }
}

int64_t elements(const PackTask& t) {
  if (t.kind == PackKind::kSlice) return t.slice.outer * t.slice.n * t.slice.inner;
  if (t.kind == PackKind::kScatter) return t.scatter.m * t.scatter.row;
  return t.rope.rows * (t.rope.rotary / 2 + t.rope.d - t.rope.rotary);
}

}  // namespace

void run_pack(const Pack& p, const Launch& l) {
  PackLaunch pl{p, {}};
  for (int t = 0; t < p.tasks; ++t) {
    const int64_t want = (elements(p.task[t]) + kThreads - 1) / kThreads;
    pl.first[t + 1] = pl.first[t] + std::max<int64_t>(1, std::min<int64_t>(want, 1024));
  }
  for (int t = p.tasks; t < kPackTasks; ++t) pl.first[t + 1] = pl.first[t];
  launch_programmatic(pack_kernel, dim3(static_cast<unsigned>(pl.first[p.tasks])), dim3(kThreads), 0, stream_of(l), true, pl, l.fault);
}

}  // namespace kvf::exec::cuda::step
