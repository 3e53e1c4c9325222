// The draw a device makes (exec/row_draw.h), on the host: greedy is row_argmax of the edited
// row; a sampled token is the inverse CDF, in id order, of softmax(logits / T) restricted to
// what top-k, top-p and min-p keep, computed here in double from a sort (ties to the lower
// id); NaN and -inf are never drawn; malformed draws are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "exec/row_argmax.h"
#include "exec/row_draw.h"
#include "testing.h"

namespace kvf {
namespace {

using exec::LogitEdit;
using exec::RowDraw;

// The kept tokens in id order and their renormalized probabilities, in double.
struct Kept {
  std::vector<int32_t> ids;
  std::vector<double> p;
};

Kept reference_kept(const std::vector<float>& l, const RowDraw& d) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!std::isnan(l[i])) order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  const double top = l[static_cast<size_t>(order[0])];
  std::vector<double> w;
  for (int32_t i : order) w.push_back(std::exp((l[static_cast<size_t>(i)] - top) / d.temperature));
  size_t keep = order.size();
  if (d.top_k > 0) keep = std::min(keep, static_cast<size_t>(d.top_k));
  const double z = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  if (d.top_p < 1) {
    double acc = 0;
    for (size_t i = 0; i < keep; ++i) {
      if ((acc += w[i] / z) >= d.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (d.min_p > 0) {
    size_t k = 1;
    while (k < keep && w[k] >= d.min_p * w[0]) ++k;
    keep = k;
  }
  std::vector<std::pair<int32_t, double>> kept;
  for (size_t i = 0; i < keep; ++i) kept.emplace_back(order[i], w[i]);
  std::sort(kept.begin(), kept.end());
  Kept k;
  double sum = 0;
  for (const auto& [id, wi] : kept) sum += wi;
  for (const auto& [id, wi] : kept) k.ids.push_back(id), k.p.push_back(wi / sum);
  return k;
}

std::vector<float> normal_row(std::mt19937_64& rng, size_t n, float sigma) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> l(n);
  for (float& x : l) x = normal(rng);
  return l;
}

int32_t draw(const std::vector<float>& l, RowDraw d, float u, std::span<const LogitEdit> edits = {}) {
  d.uniform = u;
  return exec::draw_row(l, d, edits);
}

TEST(RowDraw, GreedyIsTheEditedRowsArgmax) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> l = normal_row(rng, 300, 2.0f);
    std::vector<LogitEdit> edits;
    for (int32_t t = static_cast<int32_t>(trial % 7); t < 300; t += 37) {
      edits.push_back({.token = t, .ops = LogitEdit::kAddBias | LogitEdit::kRepeatPenalty | LogitEdit::kSubtract,
                       .bias = 1.5f, .subtract = 0.25f});
    }
    edits.push_back({.token = 5000, .ops = LogitEdit::kAddBias, .bias = 99.0f});  // outside the row: ignored
    const RowDraw d{.repeat_penalty = 1.3};
    std::vector<float> edited = l;
    for (const LogitEdit& e : edits) {
      if (e.token >= 300) continue;
      float& x = edited[static_cast<size_t>(e.token)];
      x += e.bias;
      x = x > 0 ? static_cast<float>(x / 1.3) : static_cast<float>(x * 1.3);
      x -= e.subtract;
    }
    ASSERT_EQ(draw(l, d, 0.5f, edits), exec::row_argmax(edited)) << "trial " << trial;
  }
}

// Each uniform on a fine grid lands on the token whose CDF interval holds it; uniforms within
// 1e-6 of an interval's end are skipped (the integer weights may place them either side).
TEST(RowDraw, IsTheInverseCdfOfWhatTheFiltersKeep) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<RowDraw> draws{{.temperature = 0.7f},
                                   {.temperature = 1.0f, .top_k = 40},
                                   {.temperature = 1.3f, .top_p = 0.9f},
                                   {.temperature = 1.0f, .min_p = 0.05f},
                                   {.temperature = 0.8f, .top_k = 50, .top_p = 0.8f, .min_p = 0.02f}};
  for (const RowDraw& d : draws) {
    const std::vector<float> l = normal_row(rng, 1000, 2.0f);
    const Kept k = reference_kept(l, d);
    std::vector<double> cdf(k.p.size());
    std::partial_sum(k.p.begin(), k.p.end(), cdf.begin());
    int checked = 0;
    std::set<int32_t> seen;
    for (int g = 0; g < 4000; ++g) {
      const float u = static_cast<float>(g) / 4000.0f;
      const auto at = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), static_cast<double>(u)) - cdf.begin());
      if (std::fabs(cdf[std::min(at, cdf.size() - 1)] - u) < 1e-6 || (at > 0 && std::fabs(cdf[at - 1] - u) < 1e-6)) continue;
      ++checked;
      const int32_t got = draw(l, d, u);
      seen.insert(got);
      ASSERT_EQ(got, k.ids[std::min(at, k.ids.size() - 1)]) << "u " << u << ", top_k " << d.top_k << ", top_p " << d.top_p;
    }
    EXPECT_GT(checked, 3900);
    // Every kept token wider than two grid steps is drawn; nothing else is.
    std::set<int32_t> wide;
    for (size_t i = 0; i < k.ids.size(); ++i) {
      if (k.p[i] > 2.0 / 4000) wide.insert(k.ids[i]);
    }
    for (int32_t id : wide) EXPECT_TRUE(seen.count(id)) << "token " << id << " is kept but never drawn";
    for (int32_t id : seen) EXPECT_TRUE(std::binary_search(k.ids.begin(), k.ids.end(), id)) << "token " << id;
  }
}

TEST(RowDraw, TopKOneAndATinyTopPAreGreedy) {
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<float> l = normal_row(rng, 32000, 3.0f);
  for (float u : {0.0f, 0.3f, 0.999f}) {
    EXPECT_EQ(draw(l, {.temperature = 2.0f, .top_k = 1}, u), exec::row_argmax(l));
    EXPECT_EQ(draw(l, {.temperature = 2.0f, .top_p = 1e-6f}, u), exec::row_argmax(l));
    EXPECT_EQ(draw(l, {.temperature = 2.0f, .min_p = 1.0f}, u), exec::row_argmax(l));
  }
}

// A cut through equal logits keeps the lower ids, as a stable sort would.
TEST(RowDraw, ACutThroughTiesKeepsTheLowerIds) {
  const std::vector<float> l{1, 3, 3, 3, 2};
  std::multiset<int32_t> got;
  for (int g = 0; g < 100; ++g) got.insert(draw(l, {.temperature = 1.0f, .top_k = 2}, static_cast<float>(g) / 100));
  EXPECT_EQ(got.count(1), 50u);
  EXPECT_EQ(got.count(2), 50u);
  const std::vector<float> flat(8, 0.5f);
  std::set<int32_t> kept;
  for (int g = 0; g < 100; ++g) kept.insert(draw(flat, {.temperature = 1.0f, .top_p = 0.3f}, static_cast<float>(g) / 100));
  EXPECT_EQ(kept, (std::set<int32_t>{0, 1, 2}));  // 3/8 is the first prefix to reach 0.3
}

TEST(RowDraw, NeverDrawsNanOrMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> l{nan, -inf, 0.5f, nan, 0.25f, -inf, 0.0f};
  std::set<int32_t> got;
  for (int g = 0; g < 1000; ++g) got.insert(draw(l, {.temperature = 5.0f}, static_cast<float>(g) / 1000));
  EXPECT_EQ(got, (std::set<int32_t>{2, 4, 6}));
  // No finite largest logit: the greedy token, whatever the temperature.
  EXPECT_EQ(draw({-inf, -inf, nan}, {.temperature = 1.0f}, 0.5f), exec::row_argmax(std::vector<float>{-inf, -inf, nan}));
  EXPECT_EQ(draw({1.0f, inf, inf}, {.temperature = 1.0f}, 0.9f), 1);
}

TEST(RowDraw, RefusesEditsOutsideTheStepsList) {
  exec::StepDraws d;
  d.rows = {RowDraw{.first_edit = 0, .edits = 2}};
  d.edits = {LogitEdit{.token = 1}};
  std::vector<int32_t> ids;
  const std::vector<float> logits(8, 0.0f);
  Status s = exec::draw_rows(logits, 4, d, ids);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidInput);
  d.rows = {RowDraw{}, RowDraw{}, RowDraw{}};  // three rows of an output of two
  d.edits.clear();
  EXPECT_FALSE(exec::draw_rows(logits, 4, d, ids).ok());
  d.rows.pop_back();
  ASSERT_TRUE(exec::draw_rows(logits, 4, d, ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace kvf
