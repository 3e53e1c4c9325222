// The inputs of one decode launch as they sit on the chip (ADR §0.5.3): post-RoPE Q of every
// query head, and each KV head's cache spread over its group's PEs by the round-robin rule
// (geometry.h), stored in the storage type. Rows past a PE's valid length are NaN, so a
// kernel that reads past it cannot pass a numerics check.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/dtype.h"
#include "exec/ahbm/geometry.h"

namespace kvf::ahbm {

struct AttnDims {
  int64_t n_heads = 64, n_kv_heads = 8, head_dim = 128;  // Llama3-70B attention
  int64_t group() const { return n_heads / n_kv_heads; }
};

struct PeKv {
  int64_t len = 0;           // valid_len of this PE
  std::vector<float> k, v;   // [capacity, head_dim], values rounded to the storage type
};

struct DecodeInputs {
  AttnDims dims;
  DType storage = DType::kBF16;
  KvGeometry geom;                     // counter = context length
  std::vector<float> q;                // [n_heads, head_dim], rounded to the storage type
  std::vector<std::vector<PeKv>> kv;   // [n_kv_heads][group pe_id]
  int64_t capacity = 0;                // rows per PE buffer: ceil((context + 1) / N)
};

// Writes the unrounded K and V rows of global token `token` of KV head `head`.
using KvFill = std::function<void(int64_t head, int64_t token, float* k_row, float* v_row)>;

// Places context tokens of every KV head by (request_id + token) mod n; q is [n_heads, head_dim].
DecodeInputs place_inputs(const AttnDims& dims, DType storage, int64_t context, int n, int64_t request_id,
                          const std::vector<float>& q, const KvFill& fill);
// Random inputs in [-1, 1) from a seed, drawn head by head, token by token.
DecodeInputs random_inputs(const AttnDims& dims, DType storage, int64_t context, int n, int64_t request_id,
                           uint64_t seed);
float round_storage(DType storage, float x);

}  // namespace kvf::ahbm
