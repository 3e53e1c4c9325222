#include "exec/cpu/moe.h"

#include <cstring>

#include "exec/cpu/kernels_rows.h"

namespace kvf::exec::cpu {
namespace {

Ref view(float* data, int64_t n) {
  Ref r;
  r.data = data;
  r.type = {DType::kF32, {n}};
  r.numel = n;
  return r;
}

}  // namespace

void moe(ThreadPool& pool, const MoeArgs& a) {
  const int64_t n = a.rows, d = a.dim, f = a.ffn, experts = static_cast<int64_t>(a.gate.size());
  // Scratch: the picking rows' indices, their x, gate (then the unit), up, and the unit's output.
  auto* picked = reinterpret_cast<int32_t*>(a.scratch);
  float* xs = a.scratch + n;
  float* gs = xs + n * d;
  float* us = gs + n * f;
  float* ys = us + n * f;
  std::memset(a.out, 0, static_cast<size_t>(n * d) * sizeof(float));
  for (int64_t e = 0; e < experts; ++e) {
    int64_t m = 0;
    for (int64_t r = 0; r < n; ++r) {
      if (a.weights[r * experts + e] != 0.0f) picked[m++] = static_cast<int32_t>(r);
    }
    if (m == 0) continue;
    for (int64_t i = 0; i < m; ++i) std::memcpy(xs + i * d, a.x + picked[i] * d, static_cast<size_t>(d) * sizeof(float));
    linear(pool, xs, m, d, a.gate[static_cast<size_t>(e)], nullptr, gs, f);
    linear(pool, xs, m, d, a.up[static_cast<size_t>(e)], nullptr, us, f);
    glu(pool, a.act, view(gs, m * f), view(us, m * f), view(gs, m * f));
    linear(pool, gs, m, f, a.down[static_cast<size_t>(e)], nullptr, ys, d);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = picked[i];
      const float w = a.weights[r * experts + e];
      float* o = a.out + r * d;
      for (int64_t c = 0; c < d; ++c) {
        const float term = ys[i * d + c] * w;  // rounded, then added: the chain's Mul and Add
        o[c] = o[c] + term;
      }
    }
  }
}

}  // namespace kvf::exec::cpu
