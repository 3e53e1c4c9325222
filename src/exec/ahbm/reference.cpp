// Reference attention for the AHBM checks (reference.h).
#include "exec/ahbm/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "eval/oracle.h"
#include "ir/builder.h"
#include "ir/ops.h"

namespace kvf::ahbm {

GlobalInputs random_global(const AttnDims& dims, int64_t context, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  GlobalInputs g{dims, context, {}, {}, {}};
  g.q.resize(static_cast<size_t>(dims.n_heads * dims.head_dim));
  g.k.resize(static_cast<size_t>(dims.n_kv_heads * context * dims.head_dim));
  g.v.resize(g.k.size());
  for (float& x : g.q) x = dist(rng);
  for (float& x : g.k) x = dist(rng);
  for (float& x : g.v) x = dist(rng);
  return g;
}

DecodeInputs place(const GlobalInputs& g, DType storage, int n, int64_t request_id) {
  const int64_t d = g.dims.head_dim;
  return place_inputs(g.dims, storage, g.context, n, request_id, g.q, [&](int64_t h, int64_t t, float* k, float* v) {
    const size_t at = static_cast<size_t>((h * g.context + t) * d);
    std::copy(g.k.begin() + static_cast<std::ptrdiff_t>(at), g.k.begin() + static_cast<std::ptrdiff_t>(at + d), k);
    std::copy(g.v.begin() + static_cast<std::ptrdiff_t>(at), g.v.begin() + static_cast<std::ptrdiff_t>(at + d), v);
  });
}

Result<std::vector<double>> oracle_decode(const GlobalInputs& g) {
  const AttnDims& dm = g.dims;
  Result<HostTensor> q = HostTensor::from_f32({1, dm.n_heads, 1, dm.head_dim}, g.q);
  Result<HostTensor> k = HostTensor::from_f32({1, dm.n_kv_heads, g.context, dm.head_dim}, g.k);
  Result<HostTensor> v = HostTensor::from_f32({1, dm.n_kv_heads, g.context, dm.head_dim}, g.v);
  if (!q) return q.take_error();
  if (!k) return k.take_error();
  if (!v) return v.take_error();
  ir::Builder b("ahbm_decode_reference");
  const ir::ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(dm.head_dim))};
  b.output("out", ir::ops::attention_prefill(b.constant("q", std::move(*q)), b.constant("k", std::move(*k)),
                                             b.constant("v", std::move(*v)), ir::V{}, opts));
  Result<ir::Graph> graph = b.finish();
  if (!graph) return graph.take_error();
  eval::StateStore state;
  eval::Oracle oracle({.precision = eval::Precision::kF64, .threads = 1});
  Result<eval::Outputs> out = oracle.run(*graph, {}, state);
  if (!out) return out.take_error();
  return std::move(out->at("out").data);
}

std::vector<double> direct_decode(const DecodeInputs& in) {
  const AttnDims& dm = in.dims;
  const int64_t d = dm.head_dim, s = in.geom.counter, group = dm.group();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> out(static_cast<size_t>(dm.n_heads * d), 0.0), score(static_cast<size_t>(s));
  for (int64_t h = 0; h < dm.n_heads; ++h) {
    const std::vector<PeKv>& pes = in.kv[static_cast<size_t>(h / group)];
    const float* q = in.q.data() + h * d;
    double m = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t t = 0; t < s; ++t) {
      const float* k = pes[static_cast<size_t>(owner_pe(in.geom, t))].k.data() + slot_of(in.geom, t) * d;
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
      score[static_cast<size_t>(t)] = dot * scale;
      m = std::max(m, dot * scale);
    }
    for (double& x : score) sum += (x = std::exp(x - m));
    double* o = out.data() + h * d;
    for (int64_t t = 0; t < s; ++t) {
      const float* v = pes[static_cast<size_t>(owner_pe(in.geom, t))].v.data() + slot_of(in.geom, t) * d;
      const double w = score[static_cast<size_t>(t)] / sum;
      for (int64_t c = 0; c < d; ++c) o[c] += w * v[c];
    }
  }
  return out;
}

}  // namespace kvf::ahbm
