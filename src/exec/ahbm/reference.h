// References for the simulator's numerics: the oracle (eval/) running ops::attention_prefill
// on the global Q, K, V, and a direct float64 loop that reads every token back through the
// placement (for contexts too long for the oracle's broadcast K/V).
#pragma once

#include <vector>

#include "exec/ahbm/decode_inputs.h"

namespace kvf::ahbm {

// The unplaced inputs: q [n_heads, head_dim]; k, v [n_kv_heads, context, head_dim] (f32).
struct GlobalInputs {
  AttnDims dims;
  int64_t context = 0;
  std::vector<float> q, k, v;
};
GlobalInputs random_global(const AttnDims& dims, int64_t context, uint64_t seed);
// Rounds to storage and places by (request_id + token) mod n.
DecodeInputs place(const GlobalInputs& g, DType storage, int n, int64_t request_id);

// The oracle's attention of the one decode query over all context keys (no mask: a decode
// query sees every cached token): [n_heads, head_dim], float64 evaluation.
Result<std::vector<double>> oracle_decode(const GlobalInputs& g);
// The same definition in float64 loops over the placed (rounded) values.
std::vector<double> direct_decode(const DecodeInputs& in);

}  // namespace kvf::ahbm
