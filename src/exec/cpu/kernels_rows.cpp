#include "exec/cpu/kernels_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exec/cpu/attention.h"

namespace kvf::exec::cpu {
namespace {

// Rows per task so a task does at least ~16k elements of work.
int64_t grain_rows(int64_t row) { return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(row, 1)); }

}  // namespace

void rmsnorm_rows(ThreadPool& pool, const Ref& x, const Ref& weight, double eps, bool unit_offset, const Ref& out) {
  const int64_t d = x.dim(-1), rows = x.numel / d;
  const float* w = weight.f32();
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.f32() + r * d;
      float* o = out.f32() + r * d;
      float ss = 0;
      for (int64_t c = 0; c < d; ++c) ss += xr[c] * xr[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ss) / static_cast<double>(d) + eps));
      if (unit_offset) {
        for (int64_t c = 0; c < d; ++c) o[c] = xr[c] * inv * (1.0f + w[c]);
      } else {
        for (int64_t c = 0; c < d; ++c) o[c] = xr[c] * inv * w[c];
      }
    }
  }, grain_rows(d));
}

void rope_rows(ThreadPool& pool, const Ref& x, const Ref& cos, const Ref& sin, const ir::RopeParams& p, const Ref& out) {
  const int64_t d = x.dim(-1), rows = x.numel / d, half = p.rotary_dim / 2;
  const ir::RopePositions at = ir::rope_positions(p, x.shape());
  const bool pairs = p.layout == ir::RopeLayout::kInterleaved;
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.f32() + r * d;
      float* o = out.f32() + r * d;
      const float* c = cos.f32() + (r / at.every % at.t_len) * half;
      const float* s = sin.f32() + (r / at.every % at.t_len) * half;
      if (pairs) {
        for (int64_t i = 0; i < half; ++i) {
          const float e = xr[2 * i], od = xr[2 * i + 1];
          o[2 * i] = e * c[i] - od * s[i];
          o[2 * i + 1] = e * s[i] + od * c[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = xr[i], b = xr[i + half];
          o[i] = a * c[i] - b * s[i];
          o[i + half] = b * c[i] + a * s[i];
        }
      }
      for (int64_t i = p.rotary_dim; i < d; ++i) o[i] = xr[i];
    }
  }, grain_rows(d));
}

void softmax_rows(ThreadPool& pool, const Ref& x, const Ref& out) {
  const int64_t d = x.dim(-1), rows = x.numel / d;
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x.f32() + r * d;
      float* o = out.f32() + r * d;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < d; ++c) m = std::max(m, xr[c]);
      float sum = 0;
      for (int64_t c = 0; c < d; ++c) sum += o[c] = std::exp(xr[c] - m);
      const float inv = 1.0f / sum;
      for (int64_t c = 0; c < d; ++c) o[c] *= inv;
    }
  }, grain_rows(d));
}

void glu(ThreadPool& pool, ir::GluAct act, const Ref& gate, const Ref& up, const Ref& out) {
  static const bool avx512 = attention_isa_supported(AttentionIsa::kAvx512);
  const float* g = gate.f32();
  const float* u = up.f32();
  float* o = out.f32();
  pool.parallel_for(gate.numel, [&](int64_t i0, int64_t i1) {
    if (avx512 && glu_avx512(act, g, u, o, i0, i1)) return;
    switch (act) {
      case ir::GluAct::kSilu:
        for (int64_t i = i0; i < i1; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        break;
      case ir::GluAct::kGeluTanh: {
        const float k = static_cast<float>(std::sqrt(2.0 / M_PI));
        for (int64_t i = i0; i < i1; ++i) {
          const float x = g[i];
          o[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * u[i];
        }
        break;
      }
      case ir::GluAct::kGeluErf:
        for (int64_t i = i0; i < i1; ++i) o[i] = 0.5f * g[i] * (1.0f + std::erf(g[i] * static_cast<float>(M_SQRT1_2))) * u[i];
        break;
    }
  }, 1 << 14);
}

}  // namespace kvf::exec::cpu
