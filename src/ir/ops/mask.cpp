// Additive attention masks built in the graph from Slot::Pos against the keys' positions
// (an Iota, or a paged step's key-position slot), and ALiBi.
#include <cmath>
#include <limits>

#include "ir/ops.h"

namespace kvf::ir::ops {
namespace {

// [n, Lk] (keys shared by every query) or [R, n, Lk] pred -> additive f32 [R, 1, n, Lk].
V additive(V visible) {
  if (!visible.valid()) return visible;  // a failed trace: poison has no axes to reshape
  Builder& b = *visible.b;
  const double inf = std::numeric_limits<double>::infinity();
  V m = b.select(visible, b.literal(0.0), b.literal(-inf));
  const Shape& s = visible.shape();
  if (s.size() == 2) return b.reshape(m, {1, 1, s[0], s[1]});
  return b.reshape(m, {s[0], 1, s[1], s[2]});
}

}  // namespace

V key_positions(Builder& b, int64_t lk) { return b.iota({1, lk}, 1); }

V span_mask(V pos, V keys, const std::vector<KeySpan>& spans) {
  if (!pos.valid()) return pos;  // a failed trace: poison has no axes to compare along
  if (!keys.valid()) return keys;
  Builder& b = *pos.b;
  const int64_t r = keys.dim(0), lk = keys.dim(1), n = pos.dim(0) / r;
  // One shared key row: [1, Lk] against [n, 1]; per-row keys: [R, 1, Lk] against [R, n, 1].
  V key = r == 1 ? keys : b.reshape(keys, {r, 1, lk});
  V query = r == 1 ? b.reshape(pos, {n, 1}) : b.reshape(pos, {r, n, 1});
  V visible = b.compare(key, query, CmpDir::kLe);
  for (const KeySpan& s : spans) {
    if (s.window <= 0) continue;
    V inside = b.compare(key, query - static_cast<double>(s.window), CmpDir::kGt);
    if (s.sinks > 0) inside = b.binary(OpKind::kOr, inside, b.compare(key, b.like(key, static_cast<double>(s.sinks)), CmpDir::kLt));
    visible = b.binary(OpKind::kAnd, visible, inside);
  }
  return additive(visible);
}

V causal_mask(V pos, int64_t lk) { return span_mask(pos, key_positions(*pos.b, lk), {}); }

V sliding_window_mask(V pos, int64_t lk, int64_t window) {
  return span_mask(pos, key_positions(*pos.b, lk), {KeySpan{.window = window}});
}

V selected_mask(V selected, V pos, int64_t lk, int64_t ratio) {
  if (!selected.valid()) return selected;
  if (!pos.valid()) return pos;
  Builder& b = *selected.b;
  const int64_t r = selected.dim(0), n = selected.dim(1), n_blocks = selected.dim(2);
  // Each key column takes its block's word: [R, n, NB] -> [R, n, NB * ratio] -> the first Lk.
  auto per_key = [&](V per_block) {
    V wide = b.reshape(b.broadcast(b.reshape(per_block, {r, n, n_blocks, 1}), {r, n, n_blocks, ratio}), {r, n, n_blocks * ratio});
    return b.slice_axis(wide, 2, 0, lk);
  };
  V unfinished = b.reshape(blocks_against(pos, n_blocks, ratio, CmpDir::kGt), {r, n, n_blocks});
  V query = b.broadcast(b.reshape(pos, {r, n, 1}), {r, n, lk});
  V causal = b.compare(b.broadcast(b.iota({1, 1, lk}, 2), {r, n, lk}), query, CmpDir::kLe);
  V own = per_key(unfinished);  // under causality: the query's own block while it is unfinished
  V visible = b.binary(OpKind::kAnd, causal, b.binary(OpKind::kOr, per_key(selected), own));
  return additive(visible);
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

V alibi_bias(Builder& b, const std::vector<float>& slopes, V keys, const std::string& name) {
  const int64_t h = static_cast<int64_t>(slopes.size());
  Result<HostTensor> t = HostTensor::from_f32({1, h, 1, 1}, slopes);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);
  }
  V key = b.cast(b.reshape(keys, {keys.dim(0), 1, 1, keys.dim(1)}), DType::kF32);
  return b.constant(name, std::move(*t)) * key;
}

V alibi_bias(Builder& b, const std::vector<float>& slopes, int64_t lk, const std::string& name) {
  return alibi_bias(b, slopes, key_positions(b, lk), name);
}

}  // namespace kvf::ir::ops
