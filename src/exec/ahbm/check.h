// `kvforge ahbm check`: the decode numerics table. For each context and group size N the
// simulator's O is compared with the oracle's attention on the same random Q, K, V:
// ‖Δ‖/‖ref‖ ≤ 1e-5 with f32 storage, ≤ 1e-2 with bf16 storage (DESIGN.md §7).
#pragma once

#include <string>
#include <vector>

#include "exec/ahbm/decode_run.h"
#include "exec/ahbm/reference.h"

namespace kvf::ahbm {

struct CheckOptions {
  AttnDims dims;
  std::vector<int64_t> contexts = {1, 7, 129, 1000, 2125};  // ragged tails; N = 8 gets several tiles per PE
  std::vector<int> n_pes = {1, 2, 3, 4, 8};
  std::vector<DType> storages = {DType::kF32, DType::kBF16};
  uint64_t seed = 1;
};

struct CheckRow {
  std::string kase;  // decode or decode-sp
  DType storage = DType::kF32;
  int n = 1;
  int64_t context = 0, request_id = 0;
  double rel_error = 0, tolerance = 0;
  Cycle cycles = 0;
  bool pass = false;
};

// eval::rel_error of the simulator's f32 output against a float64 reference.
double rel_error(const std::vector<float>& a, const std::vector<double>& b);
double tolerance_for(DType storage);

Result<std::vector<CheckRow>> decode_check(const AhbmConfig& cfg, const CheckOptions& opts);

}  // namespace kvf::ahbm
