// The decode linears' launches over f16/bf16 weights, at the shapes measured best
// (bench_cuda_gemv, TinyLlama-1.1B layers; docs/cuda.md); plan::linear_kernel picks which:
//   - one row: the bulk-copy kernel's one-row form (gemv_bulk.cuh), x in registers;
//   - 1-2 rows on the register kernel (gemv16.cuh), 2 columns a warp (1 with a glu), 8 groups
//     in flight, 8 warps;
//   - up to 8 rows on the bulk-copy kernel.
// All launch as programmatic dependents.
#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/gemv_bulk.cuh"

namespace kvf::exec::cuda::step {
namespace {

bool sixteen_bit(DType dt) { return dt == DType::kF16 || dt == DType::kBF16; }

template <int MR, DType dt>
void launch_register(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
  if (g.glu) gemv16_detail::launch<MR, dt, 1, 8, 8, true>(x, k, g, s, true);
  else gemv16_detail::launch<MR, dt, 2, 8, 8, false>(x, k, g, s, true);
}

template <DType dt>
void launch_register_rows(const float* x, int64_t m, int64_t k, const LinearGroup& g, cudaStream_t s) {
  if (m == 1) launch_register<1, dt>(x, k, g, s);
  else launch_register<2, dt>(x, k, g, s);
}

}  // namespace

bool gemv16_register(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (!gemv16_detail::register_fits(m, k, w_dt, g)) return false;
  if (w_dt == DType::kF16) launch_register_rows<DType::kF16>(x, m, k, g, stream_of(l));
  else launch_register_rows<DType::kBF16>(x, m, k, g, stream_of(l));
  return true;
}

bool gemv16_bulk(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (!sixteen_bit(w_dt) || !gemv_bulk_detail::bulk_fits(m, k, w_dt, g)) return false;
  if (w_dt == DType::kF16) return gemv_bulk_detail::launch_rows<DType::kF16>(x, m, k, g, stream_of(l));
  return gemv_bulk_detail::launch_rows<DType::kBF16>(x, m, k, g, stream_of(l));
}

bool gemv16_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (!sixteen_bit(w_dt) || !gemv_bulk_detail::one_row_group_fits(k, w_dt, g)) return false;
  if (w_dt == DType::kF16) return gemv_bulk_detail::launch_one_row<DType::kF16>(x, k, g, stream_of(l));
  return gemv_bulk_detail::launch_one_row<DType::kBF16>(x, k, g, stream_of(l));
}

}  // namespace kvf::exec::cuda::step
