// Linear groups (exec/cuda/step's linear_group) against a double reference on random inputs,
// for every stored weight type and every epilogue a group has: one part with a bias, three
// parts laid end to end (q, k, v) under a fused RMSNorm, a gated unit over two parts, and a
// residual add. With the tensor cores allowed, 16-bit weights over plan::kGemmRowsMin to
// kGemmRowsMax rows go to the batched-decode kernel (gemm_rows), on Hopper the groups that
// plan::gemm_stream_chosen picks (all of them at 9 rows, the multi-part ones at 33 and 64) to
// the streaming one (gemm_stream), and from kTensorCoreRows rows the other 16-bit and the
// quantized ones to cuBLASLt; the reference then rounds x (after the norm) to the weights'
// 16-bit type and widens quantized weights to f16, as those paths promise. The rest runs on
// the gemv kernels. Column counts are not multiples of what a warp or a block
// takes, and k runs past one pass of the loads, so the edges are exercised. Every kernel's
// glu also stores its output rounded to 16 bits for the group behind (glu_out16), and the
// kernels that multiply a rounded x read one handed to them (x16) in place of x.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "exec/cuda/step/kernels.h"
#include "gpu/linear_testing.h"
#include "plan/gemm_rows_schedule.h"
#include "plan/linear_kernel.h"

namespace kvf {
namespace {

using exec::cuda::step::Device;
using exec::cuda::step::LinearGroup;
using testing::Dev;

enum class Epilogue { kBias, kQkvNorm, kGluNorm, kResidual };

const char* name(Epilogue e) {
  switch (e) {
    case Epilogue::kBias: return "bias";
    case Epilogue::kQkvNorm: return "qkv_norm";
    case Epilogue::kGluNorm: return "glu_norm";
    default: return "residual";
  }
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// The parts' widths of each epilogue: q, k and v; gate and up; one part.
std::vector<int64_t> widths(Epilogue e, int64_t scale) {
  if (e == Epilogue::kQkvNorm) return {37 * scale, 18 * scale, 18 * scale};
  if (e == Epilogue::kGluNorm) return {45 * scale, 45 * scale};
  return {61 * scale};
}

// The tensor-core kernels' scratch and tile counters for g over m rows of x (parts at most
// most_n wide), as the step executor's bind_tensor_cores sizes them; set() hands them to l.
struct TensorCoreScratch {
  static exec::cuda::step::GemmRowsScratch rows_of(int64_t m, int64_t k, DType dt, const LinearGroup& g) {
    const exec::cuda::step::GemmRowsScratch rows = exec::cuda::step::gemm_rows_scratch(m, k, dt, g);
    return rows.bytes > 0 ? rows : exec::cuda::step::gemm_stream_scratch(m, k, dt, g);
  }
  TensorCoreScratch(Device& d, int64_t m, int64_t k, int64_t most_n, DType dt, const LinearGroup& g)
      : rows(rows_of(m, k, dt, g)),
        bytes(std::max({exec::cuda::step::tensor_core_scratch_bytes(m, k, most_n, dt), rows.bytes, int64_t{16}})),
        scratch(d, nullptr, bytes),
        counters(d, nullptr, std::max<int64_t>(4 * rows.counters, 16)) {}
  void set(exec::cuda::step::Launch& l) const {
    l.tc.scratch = scratch.p;
    l.tc.scratch_bytes = bytes;
    l.tc.counters = static_cast<unsigned*>(counters.p);
    l.tc.counter_count = rows.counters;
  }
  exec::cuda::step::GemmRowsScratch rows;
  int64_t bytes;
  Dev scratch, counters;
};

// linear_group against the reference; `scale` widens every part that many times.
void check_group(DType dt, int64_t m, Epilogue epilogue, int64_t k, int64_t scale = 1) {
  const bool glu = epilogue == Epilogue::kGluNorm, norm = glu || epilogue == Epilogue::kQkvNorm;
  const std::vector<int64_t> ns = widths(epilogue, scale);
  const int64_t n0 = ns[0];
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::unique_ptr<Device> device = testing::must(Device::open());
  std::vector<float> x(static_cast<size_t>(m * k)), norm_w(static_cast<size_t>(k)), bias(static_cast<size_t>(n0)),
      residual(static_cast<size_t>(m * n0));
  for (float& v : x) v = normal(rng);
  for (float& v : norm_w) v = 1.0f + 0.1f * normal(rng);
  for (float& v : bias) v = normal(rng);
  for (float& v : residual) v = normal(rng);
  const double eps = 1e-5;

  Dev xd(*device, x.data(), m * k * 4), nd(*device, norm_w.data(), k * 4), bd(*device, bias.data(), n0 * 4);
  Dev rd(*device, residual.data(), m * n0 * 4), sum(*device, nullptr, m * n0 * 4), gated(*device, nullptr, m * n0 * 4);
  Dev gated16(*device, nullptr, m * n0 * 2);
  std::vector<testing::Weights> w;
  std::vector<std::unique_ptr<Dev>> wd, outs;
  LinearGroup g;
  g.parts = static_cast<int>(ns.size());
  for (size_t p = 0; p < ns.size(); ++p) {
    w.push_back(testing::random_weights(dt, ns[p], k, rng));
    wd.push_back(std::make_unique<Dev>(*device, w[p].bytes.data(), static_cast<int64_t>(w[p].bytes.size())));
    outs.push_back(std::make_unique<Dev>(*device, nullptr, m * ns[p] * 4));
    g.part[p] = exec::cuda::step::LinearPart{wd[p]->p, nullptr, ns[p], static_cast<float*>(outs[p]->p)};
  }
  if (epilogue == Epilogue::kBias) g.part[0].bias = static_cast<const float*>(bd.p);
  Dev normed(*device, nullptr, m * k * 4);  // what the group's norm writes where its products need it whole
  if (norm) {
    g.norm_w = static_cast<const float*>(nd.p);
    g.norm_eps = eps;
    g.norm_out = static_cast<float*>(normed.p);
  }
  if (glu) {
    g.glu = true;
    g.glu_out = static_cast<float*>(gated.p);
    g.glu_out16 = gated16.p;
    g.glu_out16_bf16 = dt == DType::kBF16;
  }
  if (epilogue == Epilogue::kResidual) {
    g.residual = static_cast<const float*>(rd.p);
    g.residual_out = static_cast<float*>(sum.p);
  }
  exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
  const TensorCoreScratch tc(*device, m, k, *std::max_element(ns.begin(), ns.end()), dt, g);
  tc.set(l);
  exec::cuda::step::linear_group(static_cast<const float*>(xd.p), m, k, dt, g, l);
  ASSERT_TRUE(device->synchronize("gemv").ok());

  // The reference: x (normalized in double when a norm is fused) times the exact weights.
  std::vector<double> xr(x.begin(), x.end());
  if (norm) {
    for (int64_t r = 0; r < m; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < k; ++c) ss += xr[static_cast<size_t>(r * k + c)] * xr[static_cast<size_t>(r * k + c)];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(k) + eps);
      for (int64_t c = 0; c < k; ++c) xr[static_cast<size_t>(r * k + c)] *= inv * norm_w[static_cast<size_t>(c)];
    }
  }
  const bool tensor_cores = exec::cuda::step::tensor_core_fits(m, k, dt) || exec::cuda::step::gemm_rows_fits(m, k, dt, g);
  if (tensor_cores) {
    for (double& v : xr) {
      const auto f = static_cast<float>(v);
      v = dt == DType::kBF16 ? testing::bf16_to_f32(testing::f32_to_bf16(f)) : testing::f16_to_f32(testing::f32_to_f16(f));
    }
  }
  auto dot = [&](size_t p, int64_t r, int64_t j) {
    const std::vector<double>& wv = tensor_cores ? w[p].widened : w[p].exact;
    double acc = 0;
    for (int64_t c = 0; c < k; ++c) acc += xr[static_cast<size_t>(r * k + c)] * wv[static_cast<size_t>(j * k + c)];
    return acc;
  };
  auto fetch = [&](void* p, int64_t n) {
    std::vector<float> h(static_cast<size_t>(n));
    EXPECT_TRUE(device->copy_to_host(h.data(), p, n * 4).ok());
    return std::vector<double>(h.begin(), h.end());
  };
  std::vector<double> got, ref;
  if (glu) {
    got = fetch(gated.p, m * n0);
    std::vector<uint16_t> got16(static_cast<size_t>(m * n0));
    ASSERT_TRUE(device->copy_to_host(got16.data(), gated16.p, m * n0 * 2).ok());
    for (size_t i = 0; i < got16.size(); ++i) {
      const auto v = static_cast<float>(got[i]);
      ASSERT_EQ(got16[i], dt == DType::kBF16 ? testing::f32_to_bf16(v) : testing::f32_to_f16(v)) << "glu_out16 element " << i;
    }
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n0; ++j) ref.push_back(silu(dot(0, r, j)) * dot(1, r, j));
    }
  } else if (epilogue == Epilogue::kResidual) {
    got = fetch(sum.p, m * n0);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n0; ++j) ref.push_back(dot(0, r, j) + residual[static_cast<size_t>(r * n0 + j)]);
    }
  } else {
    for (size_t p = 0; p < ns.size(); ++p) {
      const std::vector<double> part = fetch(outs[p]->p, m * ns[p]);
      got.insert(got.end(), part.begin(), part.end());
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < ns[p]; ++j) ref.push_back(dot(p, r, j) + (g.part[p].bias ? bias[static_cast<size_t>(j)] : 0.0));
      }
    }
  }
  ASSERT_EQ(got.size(), ref.size());
  // The tensor cores' 16-bit x: where the norm's f32 result and the reference's double one
  // round to neighbouring 16-bit values, a row moves by ~1e-5 with f16 and 8 times that with
  // bf16 (3 fewer mantissa bits); a wrong epilogue moves it by ~1.
  const double bound = !(tensor_cores && norm) ? 1e-5 : dt == DType::kBF16 ? 8e-4 : 1e-4;
  EXPECT_LE(testing::rel_error(got, ref), bound) << dtype_name(dt) << " m " << m << " " << name(epilogue);
}

class Gemv : public ::testing::TestWithParam<std::tuple<DType, int64_t, Epilogue, int64_t>> {};

TEST_P(Gemv, MatchesTheDoubleReference) {
  KVF_NEED_GPU();
  // k: 1056 is 132 16-byte groups of 16-bit weights (more than one pass of 32 lanes x 4) and
  // q8_0/q4_0 rows of 1122/594 bytes (the one-warp-a-column kernel); 1280 makes the quantized
  // rows whole 16-byte vectors (the bulk-copy kernel).
  const auto [dt, m, epilogue, k] = GetParam();
  check_group(dt, m, epilogue, k);
}

// Groups 150 times the widths above (some 9,000 columns: more blocks than one wave of any
// decode kernel), with every epilogue, at one and two rows (the two-row form of the fused-norm
// register kernel, which the sweep above does not reach).
TEST(GemvWide, ManyColumnsAWarpMatchTheDoubleReference) {
  KVF_NEED_GPU();
  for (const DType dt : {DType::kF16, DType::kBF16}) {
    for (const int64_t m : {1, 2}) {
      for (const Epilogue e : {Epilogue::kBias, Epilogue::kQkvNorm, Epilogue::kGluNorm, Epilogue::kResidual}) {
        SCOPED_TRACE(str_cat(dtype_name(dt), " m ", m, " ", name(e)));
        check_group(dt, m, e, 1056, 150);
      }
    }
  }
}

// A group without a norm handed x already rounded (LinearGroup::x16) where the kernel it runs
// on multiplies a rounded x (gemm_rows, gemm_stream, cuBLASLt): the same bits as from x
// itself, though x now holds NaNs. One row goes to the one-row kernel and four to the
// bulk-copy one, which read x as it is; so do q8_0 weights below cuBLASLt's rows. A group in
// front hands x16 on where the kernel would round x in a launch of its own (hands_rounded_x):
// not to the streaming kernel, which the Hopper takes for 9 rows of 16-bit weights.
TEST(GemvHandedX16, KernelsOfARoundedXReadItInPlaceOfX) {
  KVF_NEED_GPU();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::unique_ptr<Device> device = testing::must(Device::open());
  exec::cuda::step::Launch l{device->stream(), device->fault(), 0, device->tensor_cores()};
  ASSERT_NE(l.tc.handle, nullptr);
  const int64_t k = 1280, n = 300;
  for (const DType dt : {DType::kF16, DType::kBF16, DType::kQ8_0}) {
    for (const int64_t m : {1, 4, 6, 9, 64, 130}) {
      SCOPED_TRACE(str_cat(dtype_name(dt), " m ", m));
      std::vector<float> x(static_cast<size_t>(m * k)), residual(static_cast<size_t>(m * n));
      for (float& v : x) v = normal(rng);
      for (float& v : residual) v = normal(rng);
      std::vector<uint16_t> x16(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x16[i] = dt == DType::kBF16 ? testing::f32_to_bf16(x[i]) : testing::f32_to_f16(x[i]);
      }
      const testing::Weights w = testing::random_weights(dt, n, k, rng);
      Dev xd(*device, x.data(), m * k * 4), x16d(*device, x16.data(), m * k * 2), rd(*device, residual.data(), m * n * 4);
      Dev wd(*device, w.bytes.data(), static_cast<int64_t>(w.bytes.size())), out(*device, nullptr, m * n * 4);
      Dev sum(*device, nullptr, m * n * 4);
      LinearGroup g;
      g.part[0] = exec::cuda::step::LinearPart{wd.p, nullptr, n, static_cast<float*>(out.p)};
      g.residual = static_cast<const float*>(rd.p);
      g.residual_out = static_cast<float*>(sum.p);
      const TensorCoreScratch tc(*device, m, k, n, dt, g);
      tc.set(l);
      const bool sixteen = dt != DType::kQ8_0;
      const bool rounded = m >= plan::kTensorCoreRows || (m >= plan::kGemmRowsMin && sixteen);
      const bool streamed = sixteen && exec::cuda::step::gemm_stream_fits(m, k, dt, g) && plan::gemm_stream_chosen(m, 1);
      EXPECT_EQ(exec::cuda::step::hands_rounded_x(m, k, dt, g, l), rounded && !streamed);
      auto run = [&] {
        exec::cuda::step::linear_group(static_cast<const float*>(xd.p), m, k, dt, g, l);
        EXPECT_TRUE(device->synchronize("handed x16").ok());
        std::vector<float> h(static_cast<size_t>(m * n));
        EXPECT_TRUE(device->copy_to_host(h.data(), sum.p, m * n * 4).ok());
        return h;
      };
      const std::vector<float> from_x = run();
      if (!rounded) continue;
      const std::vector<float> nans(x.size(), std::nanf(""));
      ASSERT_TRUE(device->copy_to_device(xd.p, nans.data(), m * k * 4).ok());
      g.x16 = x16d.p;
      const std::vector<float> from_x16 = run();
      ASSERT_EQ(from_x16.size(), from_x.size());
      EXPECT_EQ(0, std::memcmp(from_x16.data(), from_x.data(), from_x.size() * 4)) << "x16 gave other bits than x";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, Gemv,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0),
                       ::testing::Values(int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{33}, int64_t{64}),
                       ::testing::Values(Epilogue::kBias, Epilogue::kQkvNorm, Epilogue::kGluNorm, Epilogue::kResidual),
                       ::testing::Values(int64_t{1056}, int64_t{1280})),
    [](const auto& info) {
      return str_cat(dtype_name(std::get<0>(info.param)), "_m", std::get<1>(info.param), "_", name(std::get<2>(info.param)),
                     "_k", std::get<3>(info.param));
    });

}  // namespace
}  // namespace kvf
