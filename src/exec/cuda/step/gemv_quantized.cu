// The decode linears' launches over q8_0/q4_0 weights (1 to 8 rows of x) on the bulk-copy
// kernel (gemv_bulk.cuh) and its one-row form, where the rows are whole 16-byte vectors:
// every block has its rows' bytes on the way at once, where the one-warp-a-column kernel
// (linear.cu) keeps 8 bytes a lane.
#include "exec/cuda/step/gemv_bulk.cuh"

namespace kvf::exec::cuda::step {
namespace {

bool quantized(DType dt) { return dt == DType::kQ8_0 || dt == DType::kQ4_0; }

}  // namespace

bool gemv_quantized_bulk(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (!quantized(w_dt) || !gemv_bulk_detail::bulk_fits(m, k, w_dt, g)) return false;
  if (w_dt == DType::kQ8_0) return gemv_bulk_detail::launch_rows<DType::kQ8_0>(x, m, k, g, stream_of(l));
  return gemv_bulk_detail::launch_rows<DType::kQ4_0>(x, m, k, g, stream_of(l));
}

bool gemv_quantized_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (!quantized(w_dt) || !gemv_bulk_detail::one_row_group_fits(k, w_dt, g)) return false;
  if (w_dt == DType::kQ8_0) return gemv_bulk_detail::launch_one_row<DType::kQ8_0>(x, k, g, stream_of(l));
  return gemv_bulk_detail::launch_one_row<DType::kQ4_0>(x, k, g, stream_of(l));
}

}  // namespace kvf::exec::cuda::step
