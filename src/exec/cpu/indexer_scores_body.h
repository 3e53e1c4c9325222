// The lightning indexer's vector body (indexer_scores.h), private to its kernels: an `Isa`
// (isa_avx2.h, isa_avx512.h) with a vector of kLanes floats. K keys against V vectors of
// heads at a time, the accumulators in registers.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "exec/cpu/indexer_scores.h"

namespace kvf::exec::cpu::detail {

inline float key_value(const float* k, int64_t i) { return k[i]; }
inline float key_value(const uint16_t* k, int64_t i) { return f16_bits_to_f32(k[i]); }

// Keys [t, t + K) against the V vectors of heads at h0: adds each key's Σ_h w relu(scale dot).
template <class Isa, int K, int V, class T>
void indexer_group(const IndexerRow& r, const T* k, int64_t t, int64_t h0, float* sums) {
  typename Isa::Vec acc[K][V];
#pragma GCC unroll 4
  for (int kk = 0; kk < K; ++kk) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[kk][v] = Isa::zero();
  }
  for (int64_t d = 0; d < r.dim; ++d) {
    typename Isa::Vec q[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) q[v] = Isa::load(r.qt + d * r.hp + h0 + v * Isa::kLanes);
#pragma GCC unroll 4
    for (int kk = 0; kk < K; ++kk) {
      const typename Isa::Vec kb = Isa::set1(key_value(k, (t + kk) * r.dim + d));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[kk][v] = Isa::fma(q[v], kb, acc[kk][v]);
    }
  }
  const typename Isa::Vec scale = Isa::set1(r.scale), zero = Isa::zero();
#pragma GCC unroll 4
  for (int kk = 0; kk < K; ++kk) {
    typename Isa::Vec s = Isa::zero();
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      s = Isa::fma(Isa::load(r.wp + h0 + v * Isa::kLanes), Isa::max(Isa::mul(acc[kk][v], scale), zero), s);
    }
    sums[kk] += Isa::sum(s);
  }
}

template <class Isa, int K, class T>
void indexer_keys_group(const IndexerRow& r, const T* k, int64_t t) {
  float sums[K] = {};
  const int64_t chunk = 4 * Isa::kLanes;
  int64_t h0 = 0;
  for (; h0 + chunk <= r.hp; h0 += chunk) indexer_group<Isa, K, 4, T>(r, k, t, h0, sums);
  switch ((r.hp - h0) / Isa::kLanes) {
    case 3: indexer_group<Isa, K, 3, T>(r, k, t, h0, sums); break;
    case 2: indexer_group<Isa, K, 2, T>(r, k, t, h0, sums); break;
    case 1: indexer_group<Isa, K, 1, T>(r, k, t, h0, sums); break;
    default: break;
  }
  for (int kk = 0; kk < K; ++kk) r.out[t + kk] = sums[kk];
}

template <class Isa, class T>
void indexer_keys_typed(const IndexerRow& r, int64_t t0, int64_t t1) {
  const T* k = static_cast<const T*>(r.k);
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) indexer_keys_group<Isa, 4, T>(r, k, t);
  for (; t < t1; ++t) indexer_keys_group<Isa, 1, T>(r, k, t);
}

template <class Isa>
void indexer_keys_with(const IndexerRow& r, int64_t t0, int64_t t1) {
  if (r.k_type == DType::kF16) indexer_keys_typed<Isa, uint16_t>(r, t0, t1);
  else indexer_keys_typed<Isa, float>(r, t0, t1);
}

}  // namespace kvf::exec::cpu::detail
