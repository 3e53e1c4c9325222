// References for the simulator's numerics: the oracle (eval/) running ops::attention_prefill
// on the global Q, K, V, and direct float64 loops that read every token back through the
// placement (for contexts too long for the oracle's broadcast K/V).
#pragma once

#include <vector>

#include "exec/ahbm/decode_inputs.h"
#include "exec/ahbm/prefill_inputs.h"

namespace kvf::ahbm {

// The unplaced inputs: q [n_heads, q_len, head_dim]; k, v [n_kv_heads, context, head_dim]
// (f32). The queries are the last q_len positions of the context: decode has q_len = 1 (it
// sees every key); a prefill chunk's query i sits at context - q_len + i (causal).
struct GlobalInputs {
  AttnDims dims;
  int64_t context = 0;
  std::vector<float> q, k, v;
  int64_t q_len = 1;
  int64_t q_start() const { return context - q_len; }
};
GlobalInputs random_global(const AttnDims& dims, int64_t context, uint64_t seed, int64_t q_len = 1);
// Rounds to storage and places by (request_id + token) mod n.
DecodeInputs place(const GlobalInputs& g, DType storage, int n, int64_t request_id);

// The oracle's attention of the one decode query over all context keys (no mask: a decode
// query sees every cached token): [n_heads, head_dim], float64 evaluation.
Result<std::vector<double>> oracle_decode(const GlobalInputs& g);
// The same definition in float64 loops over the placed (rounded) values.
std::vector<double> direct_decode(const DecodeInputs& in);

// The oracle's causal attention of the q_len queries: [n_heads, q_len, head_dim] (ops::
// causal_mask over the queries' global positions, float64 evaluation).
Result<std::vector<double>> oracle_prefill(const GlobalInputs& g);
// The same definition in float64 loops over the placed (rounded) values, each key read back
// through the shard placement, for the first `kv_heads` KV heads and the sampled queries:
// [kv_heads * G, queries, head_dim] (prompts too long for the oracle).
std::vector<double> direct_prefill(const PrefillInputs& in, int64_t kv_heads, const std::vector<int64_t>& queries);
// Query indices 0, stride, 2 stride, ... and always the last one.
std::vector<int64_t> sampled_queries(int64_t q_len, int64_t stride);
// The simulator's O [kv_heads * G, q_len, head_dim] restricted to those queries.
std::vector<float> gather_queries(const std::vector<float>& out, int64_t rows, int64_t q_len, int64_t head_dim,
                                  const std::vector<int64_t>& queries);

}  // namespace kvf::ahbm
