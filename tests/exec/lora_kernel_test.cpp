// exec/cpu lora(): against plain double loops on random inputs, with rows of the base model
// (adapter 0, whose stack entry holds NaN here: it must never be read), rows of several
// adapters, an adapter no row uses, y and the result in one buffer or two, and row counts on
// both sides of the calling-thread cutoff, 1 or 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

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
  const Case cases[] = {{1, 96, 80, 8, 3, 1, false}, {5, 64, 48, 4, 4, 2, true}, {40, 96, 160, 32, 4, 2, false},
                        {64, 128, 96, 16, 3, 2, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat(c.rows, " rows, rank ", c.rank, ", ", c.adapters, " stack entries"));
    auto fill = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      return v;
    };
    std::vector<float> y = fill(c.rows * c.out), x = fill(c.rows * c.in), a = fill(c.adapters * c.rank * c.in);
    std::vector<float> b = fill(c.adapters * c.out * c.rank), s = fill(c.adapters);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(a.begin(), c.rank * c.in, nan);  // entry 0: the base model's, never read
    std::fill_n(b.begin(), c.out * c.rank, nan);
    s[0] = nan;
    std::vector<int32_t> ids(static_cast<size_t>(c.rows));
    for (int64_t t = 0; t < c.rows; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>((t * 5) % (c.adapters - 1));  // the last entry: no row
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
        for (int64_t j = 0; j < c.rank; ++j) acc += double{b[(id * c.out + o) * c.rank + j]} * ax[static_cast<size_t>(j)];
        want[static_cast<size_t>(t * c.out + o)] += s[static_cast<size_t>(id)] * acc;
      }
    }
    std::vector<float> result = c.in_place ? y : std::vector<float>(y.size(), -7.0f);
    std::vector<float> scratch(static_cast<size_t>(plan::lora_scratch_floats(c.rows, c.in, c.out, c.rank, plan::Target::kCpu)));
    ThreadPool pool(c.threads);
    lora(pool, {.y = c.in_place ? result.data() : y.data(), .x = x.data(), .rows = c.rows, .in = c.in, .out = c.out,
                .rank = c.rank, .adapters = c.adapters, .a = a.data(), .b = b.data(), .s = s.data(), .ids = ids.data(),
                .result = result.data(), .scratch = scratch.data()});
    for (int64_t t = 0; t < c.rows; ++t) {
      if (ids[static_cast<size_t>(t)] != 0) continue;
      for (int64_t o = 0; o < c.out; ++o) ASSERT_EQ(result[t * c.out + o], y[t * c.out + o]) << "a base row is y, bit for bit";
    }
    EXPECT_LE(testing::rel_error(std::vector<double>(result.begin(), result.end()), want), 1e-6);
  }
}

}  // namespace
}  // namespace kvf::exec::cpu
