// Selected attention in primitives (ops::block_topk, ops::selected_mask) on the oracle against
// plain float64 loops: random block scores with exact ties, ratios 1, 16 and 64, K from 1 to
// past the number of blocks, queries from position 0 on (no complete block yet) to the last;
// the selection bit for bit, then attention through the mask against a softmax over the
// visible keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;

struct Case {
  int64_t ratio, lk, k;
};

// The reference selection of one query: complete blocks (last position <= pos), best score
// first, the lower block first among equal scores, the first k of them.
std::vector<bool> reference_selection(const double* scores, int64_t n_blocks, int64_t pos, int64_t ratio, int64_t k) {
  std::vector<int64_t> complete;
  for (int64_t j = 0; j < n_blocks; ++j) {
    if ((j + 1) * ratio - 1 <= pos) complete.push_back(j);
  }
  std::stable_sort(complete.begin(), complete.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<bool> picked(static_cast<size_t>(n_blocks), false);
  for (size_t i = 0; i < complete.size() && static_cast<int64_t>(i) < k; ++i) picked[static_cast<size_t>(complete[i])] = true;
  return picked;
}

TEST(SelectedAttention, SelectionMaskAndAttentionMatchFloat64Loops) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const Case cases[] = {{1, 24, 5}, {1, 9, 20}, {16, 100, 2}, {16, 64, 9}, {64, 200, 1}, {64, 130, 3}};
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat("ratio ", c.ratio, ", ", c.lk, " keys, K ", c.k));
    const int64_t rows = 2, n = 5, n_blocks = (c.lk + c.ratio - 1) / c.ratio, d = 8;
    // Scores on a coarse grid, so equal scores are common and the tie rule decides.
    Buffer scores = testing::random_buffer(rng, {rows, n, n_blocks}, -2, 2);
    for (double& s : scores.data) s = std::round(s * 2) / 2;
    std::vector<int32_t> pos_words;
    std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(c.lk - 1));
    for (int64_t i = 0; i < rows * n; ++i) pos_words.push_back(i == 0 ? 0 : i == 1 ? static_cast<int32_t>(c.lk - 1) : any(rng));
    const Buffer pos = testing::must(Buffer::i32({rows * n}, pos_words));
    auto selected_mask = [&](Builder& b) {
      const V p = testing::input(b, "pos", pos);
      return ops::selected_mask(ops::block_topk(testing::input(b, "scores", scores), p, c.k, c.ratio), p, c.lk, c.ratio);
    };
    const Buffer picked = testing::run_expr([&](Builder& b) {
      return ops::block_topk(testing::input(b, "scores", scores), testing::input(b, "pos", pos), c.k, c.ratio);
    });
    const Buffer mask = testing::run_expr(selected_mask);
    ASSERT_EQ(picked.data.size(), static_cast<size_t>(rows * n * n_blocks));
    ASSERT_EQ(mask.data.size(), static_cast<size_t>(rows * n * c.lk));
    std::vector<std::vector<bool>> visible(static_cast<size_t>(rows * n));
    for (int64_t q = 0; q < rows * n; ++q) {
      const int64_t p = pos_words[static_cast<size_t>(q)];
      const std::vector<bool> want = reference_selection(scores.data.data() + q * n_blocks, n_blocks, p, c.ratio, c.k);
      for (int64_t j = 0; j < n_blocks; ++j) {
        ASSERT_EQ(picked.data[static_cast<size_t>(q * n_blocks + j)] != 0, want[static_cast<size_t>(j)]) << "query " << q << " at " << p << ", block " << j;
      }
      int64_t seen = 0;
      for (int64_t t = 0; t < c.lk; ++t) {
        const int64_t block = t / c.ratio;
        const bool own_unfinished = (block + 1) * c.ratio - 1 > p;
        const bool v = t <= p && (want[static_cast<size_t>(block)] || own_unfinished);
        visible[static_cast<size_t>(q)].push_back(v);
        seen += v;
        ASSERT_EQ(mask.data[static_cast<size_t>(q * c.lk + t)], v ? 0.0 : -std::numeric_limits<double>::infinity()) << "query " << q << ", key " << t;
      }
      // At most K whole blocks and the unfinished one: the positions the fused form visits.
      EXPECT_LE(seen, (c.k + 1) * c.ratio);
      EXPECT_GE(seen, 1) << "a query always sees itself";
    }
    // Attention over the mask: q [rows, 1, n, d], k/v [rows, 1, Lk, d].
    const Buffer qb = testing::random_buffer(rng, {rows, 1, n, d}), kb = testing::random_buffer(rng, {rows, 1, c.lk, d});
    const Buffer vb = testing::random_buffer(rng, {rows, 1, c.lk, d});
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const Buffer out = testing::run_expr([&](Builder& b) {
      return ops::attention_prefill(testing::input(b, "q", qb), testing::input(b, "k", kb), testing::input(b, "v", vb),
                                    selected_mask(b), {.scale = scale});
    });
    std::vector<double> want(static_cast<size_t>(rows * n * d), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<bool>& vis = visible[static_cast<size_t>(r * n + i)];
        std::vector<double> s(static_cast<size_t>(c.lk), -std::numeric_limits<double>::infinity());
        for (int64_t t = 0; t < c.lk; ++t) {
          if (!vis[static_cast<size_t>(t)]) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += qb.data[static_cast<size_t>((r * n + i) * d + e)] * kb.data[static_cast<size_t>((r * c.lk + t) * d + e)];
          s[static_cast<size_t>(t)] = dot * scale;
        }
        const double top = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& x : s) sum += x = std::exp(x - top);
        for (int64_t t = 0; t < c.lk; ++t) {
          for (int64_t e = 0; e < d; ++e) {
            want[static_cast<size_t>((r * n + i) * d + e)] += s[static_cast<size_t>(t)] / sum * vb.data[static_cast<size_t>((r * c.lk + t) * d + e)];
          }
        }
      }
    }
    EXPECT_LE(testing::rel_error(out.data, want), 1e-12);
  }
}

}  // namespace
}  // namespace kvf
