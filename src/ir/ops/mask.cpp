// Additive attention masks built in the graph from Slot::Pos against an Iota, and ALiBi.
#include <cmath>
#include <limits>

#include "ir/ops.h"

namespace kvf::ir::ops {
namespace {

// [T, Lk] pred -> additive f32 [1, 1, T, Lk].
V additive(V visible) {
  Builder& b = *visible.b;
  const double inf = std::numeric_limits<double>::infinity();
  V m = b.select(visible, b.literal(0.0), b.literal(-inf));
  return b.reshape(m, {1, 1, visible.dim(0), visible.dim(1)});
}

}  // namespace

V causal_mask(V pos, int64_t lk) {
  Builder& b = *pos.b;
  V key = b.iota({1, lk}, 1);
  V query = b.reshape(pos, {pos.dim(0), 1});
  return additive(b.compare(key, query, CmpDir::kLe));
}

V sliding_window_mask(V pos, int64_t lk, int64_t window) {
  Builder& b = *pos.b;
  V key = b.iota({1, lk}, 1);
  V query = b.reshape(pos, {pos.dim(0), 1});
  V causal = b.compare(key, query, CmpDir::kLe);
  V recent = b.compare(key, query - static_cast<double>(window), CmpDir::kGt);
  return additive(b.binary(OpKind::kAnd, causal, recent));
}

std::vector<float> alibi_slopes(int64_t n_heads) {
  std::vector<float> slopes;
  if (n_heads <= 0) return slopes;
  int64_t pow2 = 1;
  while (pow2 * 2 <= n_heads) pow2 *= 2;
  const double base = std::pow(2.0, -8.0 / static_cast<double>(pow2));
  for (int64_t i = 1; i <= pow2; ++i) slopes.push_back(static_cast<float>(std::pow(base, static_cast<double>(i))));
  const double extra = std::pow(2.0, -4.0 / static_cast<double>(pow2));
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < n_heads; ++i) {
    slopes.push_back(static_cast<float>(std::pow(extra, static_cast<double>(2 * i + 1))));
  }
  return slopes;
}

V alibi_bias(Builder& b, const std::vector<float>& slopes, int64_t lk, const std::string& name) {
  const int64_t h = static_cast<int64_t>(slopes.size());
  Result<HostTensor> t = HostTensor::from_f32({1, h, 1, 1}, slopes);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);
  }
  V key = b.cast(b.iota({1, 1, 1, lk}, 3), DType::kF32);
  return b.constant(name, std::move(*t)) * key;
}

}  // namespace kvf::ir::ops
