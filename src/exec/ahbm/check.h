// `kvforge ahbm check`: the numerics table of all four cases. For each context and group
// size N the simulator's O is compared with the oracle's attention on the same random Q, K,
// V: ‖Δ‖/‖ref‖ ≤ 1e-5 with f32 storage, ≤ 1e-2 with bf16 storage (DESIGN.md §7).
#pragma once

#include <string>
#include <vector>

#include "exec/ahbm/decode_run.h"
#include "exec/ahbm/prefill_run.h"
#include "exec/ahbm/reference.h"

namespace kvf::ahbm {

struct CheckOptions {
  AttnDims dims;
  std::vector<int64_t> contexts = {1, 7, 129, 1000, 2125};  // decode: ragged tails; N = 8 gets several tiles per PE
  std::vector<int> n_pes = {1, 2, 3, 4, 8};
  std::vector<DType> storages = {DType::kF32, DType::kBF16};
  uint64_t seed = 1;
  // Prefill: one KV head's group (G = 8 query heads, d = 128). The heads are independent and
  // all 8 would make the table 8 times slower. Prompts are ragged against the tile (128),
  // q_block and N; the ring runs contiguous shards for every N and strided ones for ring_strided.
  AttnDims prefill_dims{.n_heads = 8, .n_kv_heads = 1, .head_dim = 128};
  std::vector<int64_t> prompts = {1, 7, 129, 300};
  std::vector<int> ring_strided = {3, 8};
  int64_t chunk_context = 300, chunk_len = 129;  // N = 1: a chunk continuing a cached prompt
};

struct CheckRow {
  std::string kase;    // decode, decode-sp, prefill or prefill-sp
  std::string layout;  // prefill-sp: contiguous or strided shards
  DType storage = DType::kF32;
  int n = 1;
  int64_t context = 0, q_start = 0, request_id = 0;
  double rel_error = 0, tolerance = 0;
  Cycle cycles = 0;
  bool pass = false;
};

// eval::rel_error of the simulator's f32 output against a float64 reference.
double rel_error(const std::vector<float>& a, const std::vector<double>& b);
double tolerance_for(DType storage);

Result<std::vector<CheckRow>> decode_check(const AhbmConfig& cfg, const CheckOptions& opts);
Result<std::vector<CheckRow>> prefill_check(const AhbmConfig& cfg, const CheckOptions& opts);

}  // namespace kvf::ahbm
