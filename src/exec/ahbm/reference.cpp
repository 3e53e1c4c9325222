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

GlobalInputs random_global(const AttnDims& dims, int64_t context, uint64_t seed, int64_t q_len) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  GlobalInputs g{dims, context, {}, {}, {}, q_len};
  g.q.resize(static_cast<size_t>(dims.n_heads * q_len * dims.head_dim));
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

namespace {

// ops::attention_prefill on the global inputs; causal over the queries' positions or no mask.
Result<std::vector<double>> oracle_attention(const GlobalInputs& g, bool causal) {
  const AttnDims& dm = g.dims;
  Result<HostTensor> q = HostTensor::from_f32({1, dm.n_heads, g.q_len, dm.head_dim}, g.q);
  Result<HostTensor> k = HostTensor::from_f32({1, dm.n_kv_heads, g.context, dm.head_dim}, g.k);
  Result<HostTensor> v = HostTensor::from_f32({1, dm.n_kv_heads, g.context, dm.head_dim}, g.v);
  if (!q) return q.take_error();
  if (!k) return k.take_error();
  if (!v) return v.take_error();
  ir::Builder b(causal ? "ahbm_prefill_reference" : "ahbm_decode_reference");
  ir::V mask;
  if (causal) {
    std::vector<int32_t> positions(static_cast<size_t>(g.q_len));
    for (int64_t i = 0; i < g.q_len; ++i) positions[static_cast<size_t>(i)] = static_cast<int32_t>(g.q_start() + i);
    Result<HostTensor> pos = HostTensor::from_i32({g.q_len}, positions);
    if (!pos) return pos.take_error();
    mask = ir::ops::causal_mask(b.constant("pos", std::move(*pos)), g.context);
  }
  const ir::ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(dm.head_dim))};
  b.output("out", ir::ops::attention_prefill(b.constant("q", std::move(*q)), b.constant("k", std::move(*k)),
                                             b.constant("v", std::move(*v)), mask, opts));
  Result<ir::Graph> graph = b.finish();
  if (!graph) return graph.take_error();
  eval::StateStore state;
  eval::Oracle oracle({.precision = eval::Precision::kF64, .threads = 1});
  Result<eval::Outputs> out = oracle.run(*graph, {}, state);
  if (!out) return out.take_error();
  return std::move(out->at("out").data);
}

// o [d] += softmax(scale · q·kᵀ) · v over keys 0 .. n_keys - 1, in float64; row(t) gives
// key t's K and V rows wherever the placement put them. score is scratch of n_keys.
template <class Row>
void attend_f64(const float* q, int64_t n_keys, int64_t d, const Row& row, std::vector<double>& score, double* o) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int64_t t = 0; t < n_keys; ++t) {
    const float* k = row(t).first;
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
    score[static_cast<size_t>(t)] = dot * scale;
    m = std::max(m, dot * scale);
  }
  for (int64_t t = 0; t < n_keys; ++t) sum += (score[static_cast<size_t>(t)] = std::exp(score[static_cast<size_t>(t)] - m));
  for (int64_t t = 0; t < n_keys; ++t) {
    const float* v = row(t).second;
    const double w = score[static_cast<size_t>(t)] / sum;
    for (int64_t c = 0; c < d; ++c) o[c] += w * v[c];
  }
}

}  // namespace

Result<std::vector<double>> oracle_decode(const GlobalInputs& g) { return oracle_attention(g, false); }

Result<std::vector<double>> oracle_prefill(const GlobalInputs& g) { return oracle_attention(g, true); }

std::vector<double> direct_decode(const DecodeInputs& in) {
  const AttnDims& dm = in.dims;
  const int64_t d = dm.head_dim, s = in.geom.counter, group = dm.group();
  std::vector<double> out(static_cast<size_t>(dm.n_heads * d), 0.0), score(static_cast<size_t>(s));
  for (int64_t h = 0; h < dm.n_heads; ++h) {
    const std::vector<PeKv>& pes = in.kv[static_cast<size_t>(h / group)];
    attend_f64(in.q.data() + h * d, s, d, [&](int64_t t) {
      const PeKv& p = pes[static_cast<size_t>(owner_pe(in.geom, t))];
      const int64_t at = slot_of(in.geom, t) * d;
      return std::pair{p.k.data() + at, p.v.data() + at};
    }, score, out.data() + h * d);
  }
  return out;
}

std::vector<int64_t> sampled_queries(int64_t q_len, int64_t stride) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < q_len; i += std::max<int64_t>(stride, 1)) rows.push_back(i);
  if (q_len > 0 && rows.back() != q_len - 1) rows.push_back(q_len - 1);
  return rows;
}

std::vector<float> gather_queries(const std::vector<float>& out, int64_t rows, int64_t q_len, int64_t head_dim,
                                  const std::vector<int64_t>& queries) {
  std::vector<float> picked;
  picked.reserve(static_cast<size_t>(rows) * queries.size() * static_cast<size_t>(head_dim));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i : queries) {
      const auto at = out.begin() + static_cast<std::ptrdiff_t>((r * q_len + i) * head_dim);
      picked.insert(picked.end(), at, at + static_cast<std::ptrdiff_t>(head_dim));
    }
  }
  return picked;
}

std::vector<double> direct_prefill(const PrefillInputs& in, int64_t kv_heads, const std::vector<int64_t>& queries) {
  const int64_t d = in.dims.head_dim, group = in.dims.group();
  // Where each key and each query sits: (rank, slot), read back through the placement.
  std::vector<std::pair<int, int64_t>> key_at(static_cast<size_t>(in.context())), query_at(static_cast<size_t>(in.q_len));
  for (int r = 0; r < in.n(); ++r) {
    const PeShard& p = in.pe[0][static_cast<size_t>(r)];
    for (int64_t slot = 0; slot < p.kv_len; ++slot) key_at[static_cast<size_t>(key_global(in, r, slot))] = {r, slot};
    for (int64_t slot = 0; slot < p.q_len; ++slot) query_at[static_cast<size_t>(query_global(in, r, slot) - in.q_start)] = {r, slot};
  }
  std::vector<double> out(static_cast<size_t>(kv_heads * group) * queries.size() * static_cast<size_t>(d), 0.0);
  std::vector<double> score(static_cast<size_t>(in.context()));
  double* o = out.data();
  for (int64_t h = 0; h < kv_heads; ++h) {
    const std::vector<PeShard>& pes = in.pe[static_cast<size_t>(h)];
    auto row = [&](int64_t t) {
      const auto [r, slot] = key_at[static_cast<size_t>(t)];
      const PeShard& p = pes[static_cast<size_t>(r)];
      return std::pair{p.k.data() + slot * d, p.v.data() + slot * d};
    };
    for (int64_t hq = 0; hq < group; ++hq) {
      for (int64_t i : queries) {
        const auto [r, slot] = query_at[static_cast<size_t>(i)];
        const float* q = pes[static_cast<size_t>(r)].q.data() + (hq * in.q_cap + slot) * d;
        attend_f64(q, in.q_start + i + 1, d, row, score, o);  // causal: keys 0 .. q_start + i
        o += d;
      }
    }
  }
  return out;
}

}  // namespace kvf::ahbm
