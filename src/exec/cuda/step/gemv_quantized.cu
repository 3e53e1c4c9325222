// The decode linears over q8_0/q4_0 weights (1 to 8 rows of x) on the bulk-copy kernel
// (gemv_bulk.cuh) where the rows are whole 16-byte vectors: every block has its rows' bytes
// on the way at once, where the one-warp-a-column kernel (linear.cu) keeps 8 bytes a lane.
#include "exec/cuda/step/gemv_bulk.cuh"

namespace kvf::exec::cuda::step {

bool gemv_quantized(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if ((w_dt != DType::kQ8_0 && w_dt != DType::kQ4_0) || m < 1 || m > 8) return false;
  if (g.glu && g.parts != 2) return false;
  if (w_dt == DType::kQ8_0) return gemv_bulk_detail::launch_rows<DType::kQ8_0>(x, m, k, g, stream_of(l));
  return gemv_bulk_detail::launch_rows<DType::kQ4_0>(x, m, k, g, stream_of(l));
}

bool gemv_quantized_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (w_dt == DType::kQ8_0) return gemv_bulk_detail::launch_one_row<DType::kQ8_0>(x, k, g, stream_of(l));
  if (w_dt == DType::kQ4_0) return gemv_bulk_detail::launch_one_row<DType::kQ4_0>(x, k, g, stream_of(l));
  return false;
}

}  // namespace kvf::exec::cuda::step
