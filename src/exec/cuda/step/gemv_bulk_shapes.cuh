// Which linear groups the bulk-copy decode kernels (gemv_bulk.cuh) take: whole 16-byte rows
// that a block's shared memory holds. Host code, so that the step can tell plan::linear_kernel
// what can run a group before anything launches.
#pragma once

#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step::gemv_bulk_detail {

inline constexpr int64_t kMaxBlockBytes = 48 * 1024;  // the dynamic shared memory a launch may take unasked
inline constexpr int64_t kMaxOptInBytes = 227 * 1024;  // and the most it may ask for (sm_90)

// Whether rows of k elements stored as dt can be bulk-copied: whole 16-byte vectors.
inline bool bulk_rows(DType dt, int64_t k) {
  const bool typed = dt == DType::kF16 || dt == DType::kBF16 || dt == DType::kQ8_0 || dt == DType::kQ4_0;
  return typed && k % 8 == 0 && (dt == DType::kF16 || dt == DType::kBF16 || k % 32 == 0) && stored_row_bytes(dt, k) % 16 == 0;
}

// The most rows (1, 2, 4 or 8; even with a glu) whose bytes fit one block, or 0.
inline int rows_per_block(int64_t row_bytes, bool glu) {
  for (int r = 8; r >= (glu ? 2 : 1); r /= 2) {
    if (r * row_bytes <= kMaxBlockBytes) return r;
  }
  return 0;
}

// Whether one row of x over rows of k elements stored as dt runs on gemv_bulk_row_kernel:
// bulk-copyable rows, 4 of them in a block's shared memory, at most 16384 elements.
inline bool one_row_fits(DType dt, int64_t k) {
  return bulk_rows(dt, k) && 4 * stored_row_bytes(dt, k) <= kMaxOptInBytes && k / 8 <= 2048;
}

// A group's form the kernels take: a glu reads gate and up, nothing else.
inline bool group_form_fits(const LinearGroup& g) { return g.parts >= 1 && (!g.glu || g.parts == 2); }

// Whether g over m rows of x runs on the bulk-copy kernel (gemv_bulk_kernel).
inline bool bulk_fits(int64_t m, int64_t k, DType dt, const LinearGroup& g) {
  return m >= 1 && m <= plan::kGemvMaxRows && group_form_fits(g) && bulk_rows(dt, k) &&
         rows_per_block(stored_row_bytes(dt, k), g.glu) > 0;
}

// Whether g over one row of x runs on the one-row kernel (gemv_bulk_row_kernel).
inline bool one_row_group_fits(int64_t k, DType dt, const LinearGroup& g) { return group_form_fits(g) && one_row_fits(dt, k); }

}  // namespace kvf::exec::cuda::step::gemv_bulk_detail
