// exec/cpu lora(): against plain double loops on random inputs, with rows of the base model
// (adapter 0, whose stack entry holds NaN here: it must never be read), rows of several
// adapters, an adapter no row uses, y and the result in one buffer or two, row counts on
// both sides of the few-rows cutoff, widths off the vector, 1 or 2 threads, f32 and f16
// factors; a row's bits do not depend on the rows beside it, and the up-product's bodies agree
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string_view>
#include <vector>

#include "exec/cpu/linear.h"
#include "exec/cpu/lora.h"
#include "plan/plan.h"
#include "testing.h"

namespace kvf::exec::cpu {
namespace {

struct Case {
  int64_t rows, in, out, rank, adapters;
  int threads;
  bool in_place;
};

TEST(LoraKernel, MatchesTheAdaptersTermsInDouble) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const Case cases[] = {{1, 96, 80, 8, 3, 1, false},  {1, 96, 72, 16, 3, 2, true},  {5, 64, 48, 4, 4, 2, true},
                        {9, 64, 37, 8, 3, 2, false},  {40, 96, 160, 32, 4, 2, false}, {64, 128, 96, 16, 3, 2, true},
                        {70, 32, 21, 3, 3, 2, false}, {3, 32, 24, 4, 2, 2, false}};  // the last: base rows only
  for (const Case& c : cases) {
  for (const DType factors : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(str_cat(c.rows, " rows, rank ", c.rank, ", ", c.adapters, " stack entries, ", dtype_name(factors), " factors"));
    auto fill = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      return v;
    };
    std::vector<float> y = fill(c.rows * c.out), x = fill(c.rows * c.in), a = fill(c.adapters * c.rank * c.in);
    std::vector<float> b = fill(c.adapters * c.out * c.rank), s = fill(c.adapters);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(a.begin(), c.rank * c.in, nan);  // entry 0: the base model's, never read
    std::fill_n(b.begin(), c.rank * c.out, nan);
    s[0] = nan;
    // f16 factors: their bits for the kernel, and the values they hold for the reference.
    std::vector<uint16_t> a16(a.size()), b16(b.size());
    if (factors == DType::kF16) {
      for (size_t i = 0; i < a.size(); ++i) a[i] = f16_bits_to_f32(a16[i] = f32_to_f16_bits(a[i]));
      for (size_t i = 0; i < b.size(); ++i) b[i] = f16_bits_to_f32(b16[i] = f32_to_f16_bits(b[i]));
    }
    const bool half = factors == DType::kF16;
    std::vector<int32_t> ids(static_cast<size_t>(c.rows));
    for (int64_t t = 0; t < c.rows; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>((t * 5 + 1) % (c.adapters - 1));  // the last entry: no row
    std::vector<double> want(y.begin(), y.end());
    for (int64_t t = 0; t < c.rows; ++t) {
      const int64_t id = ids[static_cast<size_t>(t)];
      if (id == 0) continue;
      std::vector<double> ax(static_cast<size_t>(c.rank), 0.0);
      for (int64_t j = 0; j < c.rank; ++j) {
        for (int64_t k = 0; k < c.in; ++k) ax[j] += double{a[(id * c.rank + j) * c.in + k]} * x[t * c.in + k];
      }
      for (int64_t o = 0; o < c.out; ++o) {
        double acc = 0;
        for (int64_t j = 0; j < c.rank; ++j) acc += double{b[(id * c.rank + j) * c.out + o]} * ax[static_cast<size_t>(j)];
        want[static_cast<size_t>(t * c.out + o)] += s[static_cast<size_t>(id)] * acc;
      }
    }
    std::vector<float> result = c.in_place ? y : std::vector<float>(y.size(), -7.0f);
    std::vector<float> scratch(static_cast<size_t>(plan::lora_scratch_floats(c.rows, c.in, c.rank, plan::Target::kCpu)));
    ThreadPool pool(c.threads);
    lora(pool, {.y = c.in_place ? result.data() : y.data(), .x = x.data(), .rows = c.rows, .in = c.in, .out = c.out,
                .rank = c.rank, .adapters = c.adapters, .factors = factors, .a = half ? static_cast<const void*>(a16.data()) : a.data(),
                .b = half ? static_cast<const void*>(b16.data()) : b.data(), .s = s.data(), .ids = ids.data(),
                .result = result.data(), .scratch = scratch.data()});
    for (int64_t t = 0; t < c.rows; ++t) {
      if (ids[static_cast<size_t>(t)] != 0) continue;
      for (int64_t o = 0; o < c.out; ++o) ASSERT_EQ(result[t * c.out + o], y[t * c.out + o]) << "a base row is y, bit for bit";
    }
    EXPECT_LE(testing::rel_error(std::vector<double>(result.begin(), result.end()), want), 1e-6);
  }
  }
}


std::vector<float> random_floats(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// A row's result is the same bits alone and in a batch of 23 rows over three adapters (the
// many-rows path) or of 5 (the few-rows path): what a request gets does not depend on the
// requests beside it.
TEST(LoraKernel, ARowsBitsDoNotDependOnTheBatch) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t in = 160, out = 200, rank = 16, entries = 4;
  const std::vector<float> a = random_floats(rng, entries * rank * in), b = random_floats(rng, entries * rank * out);
  const std::vector<float> s = random_floats(rng, entries);
  ThreadPool pool(2);
  auto run = [&](const std::vector<float>& x, const std::vector<float>& y, const std::vector<int32_t>& ids) {
    const auto rows = static_cast<int64_t>(ids.size());
    std::vector<float> result(y.size()), scratch(static_cast<size_t>(plan::lora_scratch_floats(rows, in, rank, plan::Target::kCpu)));
    lora(pool, {.y = y.data(), .x = x.data(), .rows = rows, .in = in, .out = out, .rank = rank, .adapters = entries,
                .a = a.data(), .b = b.data(), .s = s.data(), .ids = ids.data(), .result = result.data(), .scratch = scratch.data()});
    return result;
  };
  for (const int64_t rows : {23, 5}) {
    const std::vector<float> x = random_floats(rng, rows * in), y = random_floats(rng, rows * out);
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int32_t>(1 + t % 3);
    const std::vector<float> batch = run(x, y, ids);
    for (int64_t t = 0; t < rows; ++t) {
      const std::vector<float> xt(x.begin() + t * in, x.begin() + (t + 1) * in), yt(y.begin() + t * out, y.begin() + (t + 1) * out);
      const std::vector<float> alone = run(xt, yt, {ids[static_cast<size_t>(t)]});
      for (int64_t o = 0; o < out; ++o) ASSERT_EQ(alone[static_cast<size_t>(o)], batch[static_cast<size_t>(t * out + o)]) << "row " << t << " of " << rows;
    }
  }
}

// The AVX2 and AVX-512 up-products give the portable body's bits (rows in fours and alone, a
// partial last vector, a column range that starts mid-row), where this CPU has them; the
// portable body is checked against double sums either way.
TEST(LoraKernel, UpProductBodiesAgree) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t m = 7, rank = 12, out = 75, c0 = 16, c1 = 75;
  const std::vector<float> ax = random_floats(rng, m * rank), base = random_floats(rng, 9 * out);
  std::vector<float> bt = random_floats(rng, rank * out);
  std::vector<uint16_t> bt16(bt.size());
  for (size_t i = 0; i < bt.size(); ++i) bt[i] = f16_bits_to_f32(bt16[i] = f32_to_f16_bits(bt[i]));  // values f16 holds
  const std::vector<int32_t> rows = {8, 0, 3, 5, 1, 7, 2};
  for (const DType type : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(type));
    std::vector<float> portable = base;
    const LoraUp up{.ax = ax.data(), .m = m, .rank = rank, .out = out, .c0 = c0, .c1 = c1, .type = type,
                    .bt = type == DType::kF16 ? static_cast<const void*>(bt16.data()) : bt.data(), .s = 0.75f,
                    .rows = rows.data(), .y = base.data(), .result = portable.data()};
    lora_up_portable(up);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < out; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < rank; ++j) acc += double{ax[static_cast<size_t>(i * rank + j)]} * bt[static_cast<size_t>(j * out + c)];
        const size_t at = static_cast<size_t>(rows[static_cast<size_t>(i)] * out + c);
        const double want = c < c0 ? base[at] : base[at] + 0.75 * acc;
        EXPECT_NEAR(portable[at], want, 1e-5) << "row " << i << ", column " << c;
      }
    }
    const std::string_view isa = linear_isa();
    for (auto body : {lora_up_avx2, lora_up_avx512}) {
      if (isa == "scalar" || (body == lora_up_avx512 && isa != "avx512")) continue;
      std::vector<float> fast = base;
      LoraUp wide = up;
      wide.result = fast.data();
      body(wide);
      EXPECT_EQ(fast, portable) << (body == lora_up_avx512 ? "avx512" : "avx2");
    }
  }
}

}  // namespace
}  // namespace kvf::exec::cpu
