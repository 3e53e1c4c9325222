// Placing a prefill launch's inputs on the ring PEs (prefill_inputs.h).
#include "exec/ahbm/prefill_inputs.h"

#include <algorithm>
#include <limits>

#include "exec/ahbm/reference.h"

namespace kvf::ahbm {

int64_t query_global(const PrefillInputs& in, int rank, int64_t slot) {
  return in.n() == 1 ? in.q_start + slot : shard_global(in.shards, rank, slot);
}

int64_t key_global(const PrefillInputs& in, int rank, int64_t slot) {
  return in.n() == 1 ? slot : shard_global(in.shards, rank, slot);
}

PrefillInputs place_prefill(const GlobalInputs& g, const AttnDims& dims, DType storage, int n, ShardLayout layout,
                            int64_t request_id) {
  PrefillInputs in;
  in.dims = dims;
  in.storage = storage;
  in.q_start = g.q_start();
  in.q_len = g.q_len;
  in.shards = n == 1 ? ShardGeometry{g.context, 1, 0, ShardLayout::kContiguous}
                     : ShardGeometry{g.q_len, n, static_cast<int>(request_id % n), layout};
  in.value_heads = g.dims.n_kv_heads;
  const int64_t d = dims.head_dim, group = dims.group();
  int64_t q_max = 0, kv_max = 0;
  for (int r = 0; r < n; ++r) {
    q_max = std::max(q_max, n == 1 ? g.q_len : shard_len(in.shards, r));
    kv_max = std::max(kv_max, shard_len(in.shards, r));
  }
  in.q_cap = q_max + 1;
  in.kv_cap = kv_max + 1;
  const float poison = std::numeric_limits<float>::quiet_NaN();
  in.pe.resize(static_cast<size_t>(dims.n_kv_heads));
  for (int64_t h = 0; h < dims.n_kv_heads; ++h) {
    for (int r = 0; r < n; ++r) {
      PeShard& p = in.pe[static_cast<size_t>(h)].emplace_back();
      p.q_len = n == 1 ? g.q_len : shard_len(in.shards, r);
      p.kv_len = shard_len(in.shards, r);
      if (h >= in.value_heads) continue;
      p.q.assign(static_cast<size_t>(group * in.q_cap * d), poison);
      p.k.assign(static_cast<size_t>(in.kv_cap * d), poison);
      p.v.assign(static_cast<size_t>(in.kv_cap * d), poison);
      for (int64_t hq = 0; hq < group; ++hq) {
        for (int64_t slot = 0; slot < p.q_len; ++slot) {
          const int64_t i = query_global(in, r, slot) - in.q_start;
          const float* src = g.q.data() + ((h * group + hq) * g.q_len + i) * d;
          float* dst = p.q.data() + (hq * in.q_cap + slot) * d;
          for (int64_t c = 0; c < d; ++c) dst[c] = round_storage(storage, src[c]);
        }
      }
      for (int64_t slot = 0; slot < p.kv_len; ++slot) {
        const int64_t at = (h * g.context + key_global(in, r, slot)) * d;
        for (int64_t c = 0; c < d; ++c) {
          p.k[static_cast<size_t>(slot * d + c)] = round_storage(storage, g.k[static_cast<size_t>(at + c)]);
          p.v[static_cast<size_t>(slot * d + c)] = round_storage(storage, g.v[static_cast<size_t>(at + c)]);
        }
      }
    }
  }
  return in;
}

}  // namespace kvf::ahbm
