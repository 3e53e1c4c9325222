// Placing a decode launch's inputs on the group PEs (decode_inputs.h).
#include "exec/ahbm/decode_inputs.h"

#include <limits>

namespace kvf::ahbm {

float round_storage(DType storage, float x) {
  switch (storage) {
    case DType::kBF16: return bf16_bits_to_f32(f32_to_bf16_bits(x));  // the hot case: 2 x 128k x 1024 values
    case DType::kF16: return f16_bits_to_f32(f32_to_f16_bits(x));
    default: return x;
  }
}

DecodeInputs place_inputs(const AttnDims& dims, DType storage, int64_t context, int n, int64_t request_id,
                          const std::vector<float>& q, const KvFill& fill) {
  DecodeInputs in;
  in.dims = dims;
  in.storage = storage;
  in.geom = KvGeometry{context, static_cast<int>(request_id % n), n};
  in.capacity = capacity_per_pe(context + 1, n);  // room for the next step's token (ADR §2.1)
  in.q.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) in.q[i] = round_storage(storage, q[i]);
  const int64_t d = dims.head_dim;
  const float poison = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> k_row(static_cast<size_t>(d)), v_row(static_cast<size_t>(d));
  in.kv.resize(static_cast<size_t>(dims.n_kv_heads));
  for (int64_t h = 0; h < dims.n_kv_heads; ++h) {
    std::vector<PeKv>& pes = in.kv[static_cast<size_t>(h)];
    pes.resize(static_cast<size_t>(n));
    for (PeKv& p : pes) {
      p.k.assign(static_cast<size_t>(in.capacity * d), poison);
      p.v.assign(static_cast<size_t>(in.capacity * d), poison);
    }
    for (int64_t t = 0; t < context; ++t) {
      fill(h, t, k_row.data(), v_row.data());
      PeKv& p = pes[static_cast<size_t>(owner_pe(in.geom, t))];
      const int64_t at = slot_of(in.geom, t) * d;
      for (int64_t c = 0; c < d; ++c) {
        p.k[static_cast<size_t>(at + c)] = round_storage(storage, k_row[static_cast<size_t>(c)]);
        p.v[static_cast<size_t>(at + c)] = round_storage(storage, v_row[static_cast<size_t>(c)]);
      }
      ++p.len;
    }
  }
  return in;
}

namespace {
// splitmix64 with two 24-bit uniforms per draw: the 128k-token case draws 2^28 values, and
// mt19937 + uniform_real_distribution dominated the run's wall time.
struct Uniform {
  uint64_t state;
  uint64_t spare = 0;
  bool has_spare = false;
  uint64_t next64() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float operator()() {  // [-1, 1)
    uint64_t bits;
    if (has_spare) {
      bits = spare;
    } else {
      const uint64_t z = next64();
      bits = z >> 40;
      spare = (z >> 16) & 0xffffff;
    }
    has_spare = !has_spare;
    return static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
  }
};
}  // namespace

DecodeInputs random_inputs(const AttnDims& dims, DType storage, int64_t context, int n, int64_t request_id,
                           uint64_t seed) {
  Uniform dist{seed};
  std::vector<float> q(static_cast<size_t>(dims.n_heads * dims.head_dim));
  for (float& x : q) x = dist();
  const size_t d = static_cast<size_t>(dims.head_dim);
  return place_inputs(dims, storage, context, n, request_id, q, [&](int64_t, int64_t, float* k, float* v) {
    for (size_t c = 0; c < d; ++c) k[c] = dist();
    for (size_t c = 0; c < d; ++c) v[c] = dist();
  });
}

}  // namespace kvf::ahbm
