#include "exec/row_draw.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "exec/row_argmax.h"

namespace kvf::exec {
namespace {

// w·2^40 rounded to the nearest integer (ties to even), as the device's __float2ull_rn.
uint64_t draw_weight(float logit, float max, float inv_t) {
  if (std::isnan(logit)) return 0;
  return static_cast<uint64_t>(std::nearbyint(std::exp((logit - max) * inv_t) * 0x1p40f));
}

}  // namespace

Status check_draws(const StepDraws& draws, int64_t rows) {
  if (static_cast<int64_t>(draws.rows.size()) > rows) {
    return invalid_input("draws: ", draws.rows.size(), " rows asked of an output of ", rows);
  }
  for (size_t r = 0; r < draws.rows.size(); ++r) {
    const RowDraw& d = draws.rows[r];
    if (d.first_edit < 0 || d.edits < 0 || d.edits > static_cast<int64_t>(draws.edits.size()) - d.first_edit) {
      return invalid_input("draws: row ", r, "'s edits [", d.first_edit, ", +", d.edits, ") are outside the step's ",
                           draws.edits.size());
    }
  }
  return {};
}

int32_t draw_row(std::span<const float> logits, const RowDraw& draw, std::span<const LogitEdit> edits) {
  std::vector<float> x(logits.begin(), logits.end());
  for (const LogitEdit& e : edits) {
    if (e.token >= 0 && static_cast<size_t>(e.token) < x.size()) {
      x[static_cast<size_t>(e.token)] = edited_logit(x[static_cast<size_t>(e.token)], e, draw.repeat_penalty);
    }
  }
  float max = -INFINITY;
  for (float v : x) max = v > max ? v : max;  // NaN never larger
  if (!(draw.temperature > 0) || !std::isfinite(max)) return row_argmax(x);

  // The candidates in order: larger logit first, a tie to the lower id; NaN is never one.
  std::vector<int32_t> order;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isnan(x[i])) order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  const float inv_t = 1.0f / draw.temperature;
  std::vector<uint64_t> w(order.size());
  for (size_t i = 0; i < order.size(); ++i) w[i] = draw_weight(x[static_cast<size_t>(order[i])], max, inv_t);

  size_t keep = order.size();
  if (draw.top_k > 0) keep = std::min(keep, static_cast<size_t>(draw.top_k));
  if (draw.top_p < 1) {
    const uint64_t total = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), uint64_t{0});
    const auto target = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(static_cast<double>(draw.top_p) *
                                                                               static_cast<double>(total))));
    uint64_t sum = 0;
    for (size_t i = 0; i < keep; ++i) {
      sum += w[i];
      if (sum >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  if (draw.min_p > 0) {
    size_t k = 1;
    while (k < keep && static_cast<double>(w[k]) >= static_cast<double>(draw.min_p) * kDrawWeightOne) ++k;
    keep = k;
  }

  // The inverse CDF of the kept weights in id order.
  std::vector<uint64_t> kept_w(x.size(), 0);
  for (size_t i = 0; i < keep; ++i) kept_w[static_cast<size_t>(order[i])] = w[i];
  const uint64_t total = std::accumulate(kept_w.begin(), kept_w.end(), uint64_t{0});
  const auto target = static_cast<uint64_t>(static_cast<double>(draw.uniform) * static_cast<double>(total));
  uint64_t sum = 0;
  for (size_t i = 0; i < kept_w.size(); ++i) {
    sum += kept_w[i];
    if (sum > target) return static_cast<int32_t>(i);
  }
  return order.front();  // unreachable: the largest logit weighs 2^40 and is always kept
}

Status draw_rows(std::span<const float> x, int64_t row, const StepDraws& draws, std::vector<int32_t>& ids) {
  if (row < 1 || x.size() % static_cast<size_t>(row) != 0) {
    return invalid_input("draws: ", x.size(), " values are not rows of ", row);
  }
  Status s = check_draws(draws, static_cast<int64_t>(x.size()) / row);
  if (!s) return s;
  ids.clear();
  for (size_t r = 0; r < draws.rows.size(); ++r) {
    const RowDraw& d = draws.rows[r];
    const std::span<const LogitEdit> edits(draws.edits.data() + d.first_edit, static_cast<size_t>(d.edits));
    ids.push_back(draw_row(x.subspan(r * static_cast<size_t>(row), static_cast<size_t>(row)), d, edits));
  }
  return {};
}

}  // namespace kvf::exec
