// Partial attention over a subset of keys, and the log-sum-exp merge (attention_merge.h).
#include "exec/cpu/attention_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kvf::exec::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element c of the f32 or f16 row at `offset` elements into `base`.
double element(const void* base, DType dtype, int64_t offset, int64_t c) {
  if (dtype == DType::kF16) return f16_bits_to_f32(static_cast<const uint16_t*>(base)[offset + c]);
  return static_cast<const float*>(base)[offset + c];
}

// Where key t of batch row b, KV head g starts: its K, shared K and V rows, in elements.
struct KeyRows {
  int64_t k = 0, ks = 0, v = 0;
};

KeyRows key_rows(const AttentionArgs& a, int64_t b, int64_t g, int64_t t) {
  if (a.read != nullptr) {  // paged: pools [pool_rows, hkv, d], key t at pool row read[b, t]
    const int64_t row = a.read[b * a.lk + t];
    return {(row * a.hkv + g) * a.dk, row * a.ds, (row * a.hkv + g) * a.dv};
  }
  return {((b * a.hkv + g) * a.lk + t) * a.dk, (b * a.lk + t) * a.ds, ((b * a.hkv + g) * a.lk + t) * a.dv};
}

// The kernel's score of key t: transform(q · key * scale) + mask.
double score(const AttentionArgs& a, const float* q, const KeyRows& at, const float* mask_row, int64_t t) {
  double dot = 0;
  for (int64_t c = 0; c < a.dk; ++c) dot += q[c] * element(a.k, a.kv_dtype, at.k, c);
  for (int64_t c = 0; c < a.ds; ++c) dot += q[a.dk + c] * element(a.k_shared, a.kv_dtype, at.ks, c);
  double s = dot * a.scale;
  if (a.softcap != 0.0f) s = a.softcap * std::tanh(s / a.softcap);
  return mask_row != nullptr ? s + mask_row[t] : s;
}

}  // namespace

float partial_attention(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, std::span<const int64_t> keys,
                        float* o) {
  const int64_t g = h / (a.hq / a.hkv);
  const float* q = a.q + ((b * a.hq + h) * a.lq + i) * (a.dk + a.ds);
  const float* mask_row = nullptr;
  if (a.mask != nullptr) {
    const int64_t mb = a.mask_batch == 1 ? 0 : b, mh = a.mask_heads == 1 ? 0 : h;
    mask_row = a.mask + ((mb * a.mask_heads + mh) * a.lq + i) * a.lk;
  }
  std::vector<double> s(keys.size());
  double m = kNegInf;
  for (size_t j = 0; j < keys.size(); ++j) {
    s[j] = score(a, q, key_rows(a, b, g, keys[j]), mask_row, keys[j]);
    m = std::max(m, s[j]);
  }
  std::fill(o, o + a.dv, 0.0f);
  if (m == kNegInf) return -std::numeric_limits<float>::infinity();
  std::vector<double> acc(static_cast<size_t>(a.dv), 0.0);
  double l = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    const double p = std::exp(s[j] - m);  // -inf scores: exactly 0
    if (p == 0) continue;
    const int64_t v = key_rows(a, b, g, keys[j]).v;
    for (int64_t c = 0; c < a.dv; ++c) acc[static_cast<size_t>(c)] += p * element(a.v, a.kv_dtype, v, c);
    l += p;
  }
  for (int64_t c = 0; c < a.dv; ++c) o[c] = static_cast<float>(acc[static_cast<size_t>(c)] / l);
  return static_cast<float>(m + std::log(l));
}

float merge_partials(int64_t parts, int64_t dv, const float* o, const float* lse, float* out) {
  double m = kNegInf;
  for (int64_t r = 0; r < parts; ++r) m = std::max(m, static_cast<double>(lse[r]));
  if (m == kNegInf) {  // every part is empty: zeros, as the kernel gives a row that sees no key
    std::fill(out, out + dv, 0.0f);
    return static_cast<float>(kNegInf);
  }
  std::vector<double> acc(static_cast<size_t>(dv), 0.0);
  double l = 0;
  for (int64_t r = 0; r < parts; ++r) {
    if (lse[r] == kNegInf) continue;  // an empty part adds nothing, whatever its o holds
    const double w = std::exp(lse[r] - m);
    for (int64_t c = 0; c < dv; ++c) acc[static_cast<size_t>(c)] += w * o[r * dv + c];
    l += w;
  }
  for (int64_t c = 0; c < dv; ++c) out[c] = static_cast<float>(acc[static_cast<size_t>(c)] / l);
  return static_cast<float>(m + std::log(l));
}

}  // namespace kvf::exec::cpu
