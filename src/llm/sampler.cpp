// Sampling: bias → penalties → temperature → top-k → softmax → top-p → min-p → draw.
#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>

namespace kvf::llm {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  double m = -INFINITY;
  for (float x : logits) m = std::max(m, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - m);
  const double lse = m + std::log(sum);
  TokenLogprobs out;
  out.token = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)]) - lse);
  const size_t n = std::min(static_cast<size_t>(std::max(top, 0)), logits.size());
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  });
  for (size_t i = 0; i < n; ++i) {
    out.top.emplace_back(idx[i], static_cast<float>(static_cast<double>(logits[static_cast<size_t>(idx[i])]) - lse));
  }
  return out;
}

bool Sampler::adjusts() const { return !cfg_.logit_bias.empty() || reads_history(); }

std::vector<exec::LogitEdit> Sampler::logit_edits(std::span<const int32_t> history, size_t n_prompt,
                                                  size_t vocab) const {
  std::map<int32_t, exec::LogitEdit> by_token;
  const auto edit = [&](int32_t t) -> exec::LogitEdit* {
    if (t < 0 || static_cast<size_t>(t) >= vocab) return nullptr;
    exec::LogitEdit& e = by_token[t];
    e.token = t;
    return &e;
  };
  for (const auto& [t, bias] : cfg_.logit_bias) {
    if (exec::LogitEdit* e = edit(t)) e->ops |= exec::LogitEdit::kAddBias, e->bias += bias;
  }
  if (cfg_.repeat_penalty != 1.0 && cfg_.repeat_last_n > 0) {
    const size_t from = history.size() > static_cast<size_t>(cfg_.repeat_last_n) ? history.size() - cfg_.repeat_last_n : 0;
    for (size_t i = from; i < history.size(); ++i) {
      if (exec::LogitEdit* e = edit(history[i])) e->ops |= exec::LogitEdit::kRepeatPenalty;
    }
  }
  if (cfg_.presence_penalty != 0.0 || cfg_.frequency_penalty != 0.0) {
    std::unordered_map<int32_t, int> count;
    for (size_t i = std::min(n_prompt, history.size()); i < history.size(); ++i) ++count[history[i]];
    for (const auto& [t, c] : count) {
      if (exec::LogitEdit* e = edit(t)) {
        e->ops |= exec::LogitEdit::kSubtract;
        e->subtract = static_cast<float>(cfg_.presence_penalty + cfg_.frequency_penalty * c);
      }
    }
  }
  std::vector<exec::LogitEdit> out;
  out.reserve(by_token.size());
  for (const auto& [t, e] : by_token) out.push_back(e);
  return out;
}

exec::RowDraw Sampler::device_draw(std::span<const int32_t> history, size_t n_prompt, size_t vocab,
                                   std::vector<exec::LogitEdit>& edits) {
  exec::RowDraw d;
  d.repeat_penalty = cfg_.repeat_penalty;
  d.first_edit = static_cast<int32_t>(edits.size());
  if (adjusts()) {
    const std::vector<exec::LogitEdit> mine = logit_edits(history, n_prompt, vocab);
    edits.insert(edits.end(), mine.begin(), mine.end());
    d.edits = static_cast<int32_t>(mine.size());
  }
  if (cfg_.temperature > 0) {
    d.temperature = static_cast<float>(cfg_.temperature);
    d.top_k = cfg_.top_k;
    d.top_p = static_cast<float>(cfg_.top_p);
    d.min_p = static_cast<float>(cfg_.min_p);
    d.uniform = static_cast<float>(rng_() >> 40) * 0x1p-24f;  // 24 random bits: [0, 1) exactly in a float
  }
  return d;
}

int32_t Sampler::sample(std::span<const float> logits_in, std::span<const int32_t> history, size_t n_prompt) {
  if (cfg_.temperature <= 0 && !adjusts()) return argmax(logits_in);  // greedy: no copy of the row
  std::vector<float> logits(logits_in.begin(), logits_in.end());
  for (const exec::LogitEdit& e : logit_edits(history, n_prompt, logits.size())) {
    float& l = logits[static_cast<size_t>(e.token)];
    l = exec::edited_logit(l, e, cfg_.repeat_penalty);
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
