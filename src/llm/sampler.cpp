// Sampling: penalty → temperature → top-k → softmax → top-p → min-p → draw.
#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace kvf::llm {

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::sample(std::span<const float> logits_in, std::span<const int32_t> history) {
  std::vector<float> logits(logits_in.begin(), logits_in.end());
  if (cfg_.repeat_penalty != 1.0 && cfg_.repeat_last_n > 0) {
    const size_t from = history.size() > static_cast<size_t>(cfg_.repeat_last_n) ? history.size() - cfg_.repeat_last_n : 0;
    std::unordered_set<int32_t> seen(history.begin() + static_cast<std::ptrdiff_t>(from), history.end());
    for (int32_t t : seen) {
      if (t < 0 || static_cast<size_t>(t) >= logits.size()) continue;
      float& l = logits[static_cast<size_t>(t)];
      l = l > 0 ? static_cast<float>(l / cfg_.repeat_penalty) : static_cast<float>(l * cfg_.repeat_penalty);
    }
  }
  if (cfg_.temperature <= 0) return argmax(logits);

  // Candidates sorted by logit, best first; top-k cuts the list.
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (cfg_.top_k > 0 && static_cast<size_t>(cfg_.top_k) < idx.size()) idx.resize(static_cast<size_t>(cfg_.top_k));
  std::vector<double> p(idx.size());
  const double m = logits[static_cast<size_t>(idx[0])];
  double sum = 0;
  for (size_t i = 0; i < idx.size(); ++i) sum += p[i] = std::exp((logits[static_cast<size_t>(idx[i])] - m) / cfg_.temperature);
  for (double& x : p) x /= sum;
  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  size_t keep = p.size();
  if (cfg_.top_p < 1.0) {
    double acc = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      acc += p[i];
      if (acc >= cfg_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  // min-p: drop tokens far less likely than the best one.
  if (cfg_.min_p > 0) {
    size_t k = 1;
    while (k < keep && p[k] >= cfg_.min_p * p[0]) ++k;
    keep = k;
  }
  std::discrete_distribution<size_t> draw(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep));
  return idx[draw(rng_)];
}

}  // namespace kvf::llm
