// exec/cpu linear(): every ISA body this CPU can run, against plain double loops over the
// dequantized weights, on random inputs with odd sizes, strides, bias and 1 or 2 threads.
// q8_0/q4_0 quantize x to 8 bits; they are held to the exact-dequant reference by a bound
// and to a reference on the same quantized x (replayed here) by the float tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "exec/cpu/linear.h"
#include "exec/cpu/linear_impl.h"
#include "testing.h"

namespace kvf::exec::cpu {
namespace {

constexpr double kFloatTol = 1e-5;
// x quantized to 8 bits per block of 32 (d = amax/127): each x value moves by at most d/2.
// So every output obeys |y − y_exact| <= Σ_c (d_c/2)·|w_jc| (checked per element, plus f32
// rounding slack). Normwise, for x uniform in [-1, 1] the move is ≈ uniform in ±d/2, i.e.
// an rms of (d/2)/√3 against the rms 1/√3 of x: ≈ d/2 ≈ 1/254 ≈ 3.9e-3 relative, which
// random weights carry over to y when they average many terms (k >= 256, >= 64 outputs).
// Measured 4-5.5e-3 over the sweep; the bound is 1e-2. A single short dot product can
// cancel, so small cases are held to the per-element bound only.
constexpr double kQuantTol = 1e-2;

const std::vector<std::string> kIsas = {"avx512", "avx2", "scalar"};

// A weight matrix in its stored bytes, plus the same values decoded to double.
struct Weights {
  DType dtype;
  int64_t n, k;
  std::vector<uint8_t> bytes;  // stored rows, starting at `offset` (odd: unaligned rows)
  size_t offset = 1;
  std::vector<double> deq;  // [n, k]

  WeightView view() const { return {dtype, bytes.data() + offset, n, k}; }
};

Weights random_weights(std::mt19937_64& rng, DType dt, int64_t n, int64_t k) {
  Weights w{dt, n, k, {}, 1, {}};
  const int64_t row = testing::must(storage_bytes(dt, k));
  w.bytes.resize(w.offset + static_cast<size_t>(n * row));
  uint8_t* p = w.bytes.data() + w.offset;
  std::uniform_real_distribution<float> val(-1.0f, 1.0f), scale(0.002f, 0.02f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t b = 0; b < n * row / block_bytes(dt); ++b) {
    uint8_t* blk = p + b * block_bytes(dt);
    if (dt == DType::kF32) {
      const float v = val(rng);
      std::memcpy(blk, &v, 4);
    } else if (dt == DType::kF16 || dt == DType::kBF16) {
      const uint16_t h = dt == DType::kF16 ? f32_to_f16_bits(val(rng)) : f32_to_bf16_bits(val(rng));
      std::memcpy(blk, &h, 2);
    } else if (is_kquant(dt)) {  // raw random bytes (every quant, scale and min), then f16 scales
      for (int64_t t = 0; t < block_bytes(dt); ++t) blk[t] = static_cast<uint8_t>(byte(rng));
      // q4_k/q5_k: w = d·sc·q − dmin·m with sc, m < 64; q6_k: w = d·sc·(q − 32), |sc| <= 128.
      // The mins sit mid-range (dmin = d · the mean quant), as a quantizer puts them, so
      // that an output is not the small difference of two large sums.
      if (dt == DType::kQ6_K) {
        const uint16_t d = f32_to_f16_bits(scale(rng) / 2048.0f);
        std::memcpy(blk + 208, &d, 2);
      } else {
        const float d = scale(rng) / 512.0f;
        const uint16_t dh = f32_to_f16_bits(d), mh = f32_to_f16_bits(d * (dt == DType::kQ4_K ? 7.5f : 15.5f));
        std::memcpy(blk, &dh, 2);
        std::memcpy(blk + 2, &mh, 2);
      }
    } else {  // scale, then raw random bytes: q8_0 spans -128..127, q4_0 all 16 nibbles
      const uint16_t d = f32_to_f16_bits(scale(rng));
      std::memcpy(blk, &d, 2);
      for (int64_t t = 2; t < block_bytes(dt); ++t) blk[t] = static_cast<uint8_t>(byte(rng));
    }
  }
  std::vector<float> tmp(static_cast<size_t>(k));
  w.deq.resize(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(dequantize_row(dt, p + j * row, tmp.data(), k).ok());
    for (int64_t c = 0; c < k; ++c) w.deq[static_cast<size_t>(j * k + c)] = tmp[static_cast<size_t>(c)];
  }
  return w;
}

// The x quantization rule of linear_impl.h, written out again: d = amax/127 and
// q = nearbyint(x · (127/amax)), in f32 like the kernels, so the integers match exactly.
// Returns d·q densely [m, k] and, in `half_step`, d/2 per element: the most x can move.
std::vector<double> quantized_x(const std::vector<float>& x, int64_t m, int64_t k, int64_t stride,
                                std::vector<double>* half_step) {
  std::vector<double> out(static_cast<size_t>(m * k));
  half_step->assign(static_cast<size_t>(m * k), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float* xb = x.data() + i * stride + b * 32;
      float amax = 0.0f;
      for (int c = 0; c < 32; ++c) amax = std::max(amax, std::fabs(xb[c]));
      const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int c = 0; c < 32; ++c) {
        const size_t at = static_cast<size_t>(i * k + b * 32 + c);
        out[at] = static_cast<double>(d) * std::nearbyint(xb[c] * id);
        (*half_step)[at] = 0.5 * d;
      }
    }
  }
  return out;
}

// Everything one case is checked against, from one pass of plain double loops.
struct References {
  std::vector<double> exact;   // x · dequant(w)ᵀ + bias
  std::vector<double> same_q;  // the same on the quantized x (= exact for float weights)
  std::vector<double> bound;   // Σ_c (d_c/2)·|w_jc|: the most x quantization moves an output
  // Σ_c (|x_ic| + d_c/2)·|w_jc| + |bias_j|: the scale of an output's rounding error. Unlike
  // |y| it cannot vanish by cancellation, so short dot products are held to it per element.
  std::vector<double> mag;
};

// xd: x dense [m, k]; xq: its quantized values; half_step: d/2 per element (0 when exact).
References references(const std::vector<double>& xd, const std::vector<double>& xq,
                      const std::vector<double>& half_step, const Weights& w, int64_t m, const float* bias) {
  const size_t outputs = static_cast<size_t>(m * w.n);
  References r{std::vector<double>(outputs), std::vector<double>(outputs), std::vector<double>(outputs),
               std::vector<double>(outputs)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < w.n; ++j) {
      const double b = bias ? bias[j] : 0.0;
      double exact = b, same_q = b, bound = 0, mag = std::fabs(b);
      for (int64_t c = 0; c < w.k; ++c) {
        const size_t xc = static_cast<size_t>(i * w.k + c);
        const double wv = w.deq[static_cast<size_t>(j * w.k + c)];
        exact += xd[xc] * wv;
        same_q += xq[xc] * wv;
        bound += half_step[xc] * std::fabs(wv);
        mag += (std::fabs(xd[xc]) + half_step[xc]) * std::fabs(wv);
      }
      const size_t at = static_cast<size_t>(i * w.n + j);
      r.exact[at] = exact, r.same_q[at] = same_q, r.bound[at] = bound, r.mag[at] = mag;
    }
  }
  return r;
}

// Outputs with |got − ref| > allowed + tol·mag (NaN counts).
int64_t beyond(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& allowed,
               const std::vector<double>& mag, double tol) {
  int64_t bad = 0;
  for (size_t t = 0; t < got.size(); ++t) bad += !(std::fabs(got[t] - ref[t]) <= allowed[t] + tol * mag[t]);
  return bad;
}

struct Case {
  DType dt;
  int64_t m, n, k;
  bool bias;
  int64_t x_pad, y_pad;  // extra elements at the end of each x / y row
};

std::string describe(const Case& c, const std::string& isa, int threads) {
  return std::string(dtype_name(c.dt)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
         " k=" + std::to_string(c.k) + (c.bias ? " bias" : "") + " x_pad=" + std::to_string(c.x_pad) +
         " y_pad=" + std::to_string(c.y_pad) + " isa=" + isa + " threads=" + std::to_string(threads);
}

struct Errors {
  double exact = 0, same_q = 0;  // vs the exact-dequant reference; vs the quantized-x reference
};

// Runs one case on one body; checks every output was written and the padding was not.
Errors run_case(std::mt19937_64& rng, const Case& c, const detail::Kernels& kern, ThreadPool& pool) {
  const Weights w = random_weights(rng, c.dt, c.n, c.k);
  const int64_t xs = c.k + c.x_pad, ys = c.n + c.y_pad;
  std::vector<float> x(static_cast<size_t>(c.m * xs)), bias(static_cast<size_t>(c.n));
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (float& v : x) v = val(rng);
  for (float& v : bias) v = val(rng);
  std::vector<double> xd(static_cast<size_t>(c.m * c.k));
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t t = 0; t < c.k; ++t) xd[static_cast<size_t>(i * c.k + t)] = x[static_cast<size_t>(i * xs + t)];
  }
  const float* b = c.bias ? bias.data() : nullptr;

  std::vector<float> y(static_cast<size_t>(c.m * ys), std::numeric_limits<float>::quiet_NaN());
  detail::linear_with(kern, pool, x.data(), c.m, xs, w.view(), b, y.data(), ys);

  std::vector<double> got(static_cast<size_t>(c.m * c.n));
  int64_t unwritten = 0, clobbered = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < ys; ++j) {
      const float v = y[static_cast<size_t>(i * ys + j)];
      if (j < c.n) {
        unwritten += std::isnan(v);
        got[static_cast<size_t>(i * c.n + j)] = v;
      } else {
        clobbered += !std::isnan(v);
      }
    }
  }
  EXPECT_EQ(unwritten, 0) << "outputs left NaN";
  EXPECT_EQ(clobbered, 0) << "padding between y rows was written";
  // Float weights: x is used exactly, so the quantized-x reference and its bound collapse.
  std::vector<double> half_step(xd.size(), 0.0);
  const std::vector<double> xq = is_block_quant(c.dt) ? quantized_x(x, c.m, c.k, xs, &half_step) : xd;
  const References ref = references(xd, xq, half_step, w, c.m, b);
  const std::vector<double> zero(got.size(), 0.0);
  EXPECT_EQ(beyond(got, ref.same_q, zero, ref.mag, kFloatTol), 0) << "outputs off by more than f32 rounding";
  EXPECT_EQ(beyond(got, ref.exact, ref.bound, ref.mag, kFloatTol), 0) << "outputs beyond the x-quantization bound";
  return {testing::rel_error(got, ref.exact), testing::rel_error(got, ref.same_q)};
}

void check_case(std::mt19937_64& rng, const Case& c, const std::string& isa, ThreadPool& pool,
                Errors* worst = nullptr) {
  const detail::Kernels* kern = detail::kernels_for(isa);
  ASSERT_NE(kern, nullptr);
  SCOPED_TRACE(describe(c, isa, pool.size()));
  const Errors e = run_case(rng, c, *kern, pool);
  // Normwise bounds need many outputs (and, for the quantization noise, long sums) to
  // average over; every case already met the per-element bounds above.
  const bool quant = is_block_quant(c.dt);
  const bool many = c.m * c.n >= 64, averaged = many && (!quant || c.k >= 256);
  if (many) {
    EXPECT_LE(e.same_q, kFloatTol);
  }
  if (averaged) {
    EXPECT_LE(e.exact, quant ? kQuantTol : kFloatTol);
  }
  if (!worst) return;
  if (many) worst->same_q = std::max(worst->same_q, e.same_q);
  if (averaged) worst->exact = std::max(worst->exact, e.exact);
}

std::vector<std::string> runnable_isas() {
  std::vector<std::string> out;
  for (const auto& isa : kIsas) {
    if (detail::kernels_for(isa)) out.push_back(isa);
  }
  return out;
}

class LinearTest : public ::testing::TestWithParam<DType> {};

// The size sweep of the brief: m × n × k crossed, minus the products too slow for the
// double reference; each case alternates bias and strides and runs on 1 and 2 threads.
TEST_P(LinearTest, OddSizesEveryBody) {
  const DType dt = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  const std::vector<int64_t> ks = is_kquant(dt)         ? std::vector<int64_t>{256, 512, 768}
                                  : is_block_quant(dt) ? std::vector<int64_t>{32, 64, 96, 768}
                                                       : std::vector<int64_t>{1, 7, 64, 96, 768};
  ThreadPool one(1), two(2);
  Errors worst;
  int index = 0;
  for (const auto& isa : runnable_isas()) {
    for (int64_t m : {1, 2, 3, 7, 64, 130}) {
      for (int64_t n : {1, 5, 31, 64, 768, 2051}) {
        for (int64_t k : ks) {
          if (m * n * k > 4'000'000) continue;  // the double reference would dominate
          ++index;
          const Case c{dt, m, n, k, (index / 2) % 2 == 0, index % 3, (index / 3) % 3};
          check_case(rng, c, isa, index % 2 ? two : one, &worst);
        }
      }
    }
  }
  std::printf("[ %s ] worst normwise rel error: vs exact-dequant reference %.3g, vs same-quantized-x reference %.3g\n",
              std::string(dtype_name(dt)).c_str(), worst.exact, worst.same_q);
}

// Prefill-sized calls (packed GEMM with several row blocks and panels) on the fast bodies.
TEST_P(LinearTest, LargeShapes) {
  const DType dt = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  ThreadPool two(2);
  for (const auto& isa : runnable_isas()) {
    if (isa == "scalar") continue;
    check_case(rng, {dt, 130, 300, 768, true, 5, 3}, isa, two);
    check_case(rng, {dt, 70, 96, 2048, false, 0, 0}, isa, two);
    check_case(rng, {dt, 1, 2051, 2048, true, 0, 0}, isa, two);
  }
}

// Weight decoding alone: x = 127 · I makes y = 127 · dequant(w)ᵀ, and every body must give
// exactly float(127 · w) — x quantizes exactly (d = 1, q = 127), so there is one rounding.
// k-quants scale the integer dot and subtract the min (or scale by sc, then d) in an order of
// their own (linear_impl.h), not the decoder's: two roundings, each within an f32 step of
// the row's largest weight.
TEST_P(LinearTest, OneHotRowsReproduceDequantizeRow) {
  const DType dt = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  const int64_t n = 37, k = is_kquant(dt) ? 256 : 96;
  const Weights w = random_weights(rng, dt, n, k);
  ThreadPool two(2);
  for (const auto& isa : runnable_isas()) {
    SCOPED_TRACE(isa);
    for (int64_t m : {int64_t{1}, k}) {  // m = 1 streams the weights, m = k packs them
      std::vector<float> x(static_cast<size_t>(m * k), 0.0f), y(static_cast<size_t>(m * n), std::nanf(""));
      const int64_t col0 = m == 1 ? 41 : 0;  // the one-hot column of row i is col0 + i
      for (int64_t i = 0; i < m; ++i) x[static_cast<size_t>(i * k + col0 + i)] = 127.0f;
      detail::linear_with(*detail::kernels_for(isa), two, x.data(), m, k, w.view(), nullptr, y.data(), n);
      int64_t wrong = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const float want = static_cast<float>(127.0 * w.deq[static_cast<size_t>(j * k + col0 + i)]);
          const float got = y[static_cast<size_t>(i * n + j)];
          if (!is_kquant(dt)) {
            wrong += got != want;
            continue;
          }
          double row_max = 0;
          for (int64_t c = 0; c < k; ++c) row_max = std::max(row_max, std::fabs(w.deq[static_cast<size_t>(j * k + c)]));
          wrong += !(std::fabs(got - want) <= 4 * 127.0 * row_max * std::numeric_limits<float>::epsilon());
        }
      }
      EXPECT_EQ(wrong, 0) << "m=" << m;
    }
  }
}

// One order of the sums (linear_impl.h): every body gives the scalar body's bits, and an x
// row's outputs are the same bits whether the call holds it alone or among m rows (streamed,
// packed per call or packed ahead), at any offset, on one thread or two. This is what makes
// a request's tokens independent of the batch it runs in.
TEST_P(LinearTest, OneOrderWhateverTheBatch) {
  const DType dt = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed=" << seed);
  std::mt19937_64 rng(seed);
  ThreadPool one(1), two(2);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  const detail::Kernels& scalar = *detail::kernels_for("scalar");
  for (int64_t k : is_kquant(dt)         ? std::vector<int64_t>{256, 512}
                  : is_block_quant(dt) ? std::vector<int64_t>{32, 160}
                                       : std::vector<int64_t>{5, 48, 157}) {
    const int64_t n = 37, m = 70;
    const Weights w = random_weights(rng, dt, n, k);
    std::vector<float> x(static_cast<size_t>(m * k)), bias(static_cast<size_t>(n));
    for (float& v : x) v = val(rng);
    for (float& v : bias) v = val(rng);
    for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
      // Each row alone on the scalar body: the bits every other call must give.
      std::vector<float> want(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        detail::linear_with(scalar, one, x.data() + i * k, 1, k, w.view(), b, want.data() + i * n, n);
      }
      for (const auto& isa : runnable_isas()) {
        for (int64_t rows : {1, 2, 3, 5, 6, 16, 17, 70}) {
          for (int64_t first : {int64_t{0}, m - rows}) {
            const detail::Kernels& kern = *detail::kernels_for(isa);
            ThreadPool& pool = rows % 2 ? one : two;
            for (const auto& packed : {std::shared_ptr<const PackedWeights>(),
                                       detail::pack_weights_with(kern, pool, w.view(), rows)}) {
              std::vector<float> y(static_cast<size_t>(rows * n));
              detail::linear_with(kern, pool, x.data() + first * k, rows, k, w.view(), b, y.data(), n, packed.get());
              const bool same = std::memcmp(y.data(), want.data() + first * n, y.size() * sizeof(float)) == 0;
              EXPECT_TRUE(same) << isa << " k=" << k << " rows " << first << ".." << first + rows
                                << (b ? " bias" : "") << (packed ? " packed ahead" : "");
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Packing ahead: q8_0 and q4_0 weights, for calls past one streaming pass and up to a row
// block, on the AVX-512 body; one packing per weight view, shared while it is held.
TEST(Linear, WeightsArePackedAheadOnlyWhereItPaysAndOnce) {
  std::mt19937_64 rng(testing::test_seed());
  ThreadPool pool(2);
  const bool packs = std::string(linear_isa()) == "avx512";
  const Weights q8 = random_weights(rng, DType::kQ8_0, 70, 64), q4 = random_weights(rng, DType::kQ4_0, 70, 64);
  const Weights f16 = random_weights(rng, DType::kF16, 70, 64);
  const std::shared_ptr<const PackedWeights> a = pack_weights(pool, q8.view(), 16);
  EXPECT_EQ(a != nullptr, packs);
  EXPECT_EQ(pack_weights(pool, q8.view(), 5), a) << "one packing per weight view";
  EXPECT_EQ(pack_weights(pool, q4.view(), 64) != nullptr, packs);
  EXPECT_NE(pack_weights(pool, q4.view(), 64), a);
  EXPECT_EQ(pack_weights(pool, q8.view(), 4), nullptr) << "four rows stream in one pass";
  EXPECT_EQ(pack_weights(pool, q8.view(), 65), nullptr) << "past a row block a call packs for itself";
  EXPECT_EQ(pack_weights(pool, f16.view(), 16), nullptr) << "a float panel would double the weights";
}

TEST(Linear, PicksTheWidestBodyThisCpuRuns) {
  const std::string isa = linear_isa();
  EXPECT_EQ(isa, runnable_isas().front());
  EXPECT_EQ(detail::kernels_for("sse9"), nullptr);
}

// The public entry on the chosen body, and the degenerate shapes: k = 0 gives the bias,
// m = 0 or n = 0 writes nothing.
TEST(Linear, PublicEntryAndEmptyShapes) {
  std::mt19937_64 rng(testing::test_seed());
  ThreadPool pool(2);
  const Weights w = random_weights(rng, DType::kF16, 9, 40);
  std::vector<float> x(3 * 40), bias(9), y(3 * 9, std::nanf(""));
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (float& v : x) v = val(rng);
  for (float& v : bias) v = val(rng);
  linear(pool, x.data(), 3, 40, w.view(), bias.data(), y.data(), 9);
  std::vector<double> xd(x.begin(), x.end()), got(y.begin(), y.end());
  const References ref = references(xd, xd, std::vector<double>(xd.size()), w, 3, bias.data());
  EXPECT_LE(testing::rel_error(got, ref.exact), kFloatTol);

  std::fill(y.begin(), y.end(), std::nanf(""));
  linear(pool, x.data(), 3, 40, WeightView{DType::kQ8_0, nullptr, 9, 0}, bias.data(), y.data(), 9);
  for (int64_t i = 0; i < 27; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], bias[static_cast<size_t>(i % 9)]);

  std::fill(y.begin(), y.end(), std::nanf(""));
  linear(pool, x.data(), 0, 40, w.view(), bias.data(), y.data(), 9);
  linear(pool, x.data(), 3, 40, WeightView{DType::kF16, w.view().data, 0, 40}, bias.data(), y.data(), 9);
  for (float v : y) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace kvf::exec::cpu
