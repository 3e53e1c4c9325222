#include "exec/row_argmax.h"

#include <array>
#include <cmath>
#include <cstddef>

namespace kvf::exec {

// The largest value comes from 16 independent running maxima (one chain of compares is bound
// by its latency: 30 us over a 32k vocabulary, a batch of 64 rows waited 2 ms), then the scan
// for its first index.
int32_t row_argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  constexpr size_t kLanes = 16;
  std::array<float, kLanes> lane;
  lane.fill(logits[0]);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
  }
  float top = logits[0];
  for (float v : lane) top = v > top ? v : top;
  for (; i < n; ++i) top = logits[i] > top ? logits[i] : top;
  size_t first = 0;
  while (logits[first] != top) ++first;
  return static_cast<int32_t>(first);
}

void rows_argmax(std::span<const float> x, int64_t row, std::vector<int32_t>& ids) {
  ids.clear();
  const auto n = static_cast<size_t>(row);
  for (size_t r = 0; r + n <= x.size(); r += n) ids.push_back(row_argmax(x.subspan(r, n)));
}

}  // namespace kvf::exec
