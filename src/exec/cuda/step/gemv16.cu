// The decode linears over f16/bf16 weights: which kernel runs each group, at the
// shapes measured best (bench_cuda_gemv, TinyLlama-1.1B layers; docs/cuda.md):
//   - one row: the bulk-copy kernel's one-row form (gemv_bulk.cuh), x in registers, for every
//     group (37.3 us a layer on an H100 against 50.3 for the two kernels below);
//   - two rows with a fused RMSNorm: the register kernel (gemv16.cuh), 2 columns a warp, 8
//     groups in flight, 8 warps: its blocks are fewer, so fewer of them recompute 1/rms over x;
//   - everything else: the bulk-copy kernel, and with 8 rows of x 81 us a layer against 105.
// All launch as programmatic dependents.
#include "exec/cuda/step/gemv16.cuh"
#include "exec/cuda/step/gemv_bulk.cuh"

namespace kvf::exec::cuda::step {
namespace {

// One or two rows of x behind a fused norm: the register kernel, for exactly that many rows.
template <int MR, DType dt>
void launch_register(const float* x, int64_t k, const LinearGroup& g, cudaStream_t s) {
  if (g.glu) gemv16_detail::launch<MR, dt, 1, 8, 8, true>(x, k, g, s, true);
  else gemv16_detail::launch<MR, dt, 2, 8, 8, false>(x, k, g, s, true);
}

template <DType dt>
bool launch_any(const float* x, int64_t m, int64_t k, const LinearGroup& g, cudaStream_t s) {
  const bool one_row = m == 1 && gemv_bulk_detail::one_row_fits(dt, k);
  if (g.norm_w != nullptr && m <= 2 && !one_row) {
    if (m == 1) launch_register<1, dt>(x, k, g, s);
    else launch_register<2, dt>(x, k, g, s);
    return true;
  }
  return gemv_bulk_detail::launch_rows<dt>(x, m, k, g, s);
}

}  // namespace

bool gemv16(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if ((w_dt != DType::kF16 && w_dt != DType::kBF16) || m < 1 || m > 8 || k % 8 != 0) return false;
  if (g.glu && g.parts != 2) return false;
  if (w_dt == DType::kF16) return launch_any<DType::kF16>(x, m, k, g, stream_of(l));
  return launch_any<DType::kBF16>(x, m, k, g, stream_of(l));
}

bool gemv16_one_row(const float* x, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (w_dt == DType::kF16) return gemv_bulk_detail::launch_one_row<DType::kF16>(x, k, g, stream_of(l));
  if (w_dt == DType::kBF16) return gemv_bulk_detail::launch_one_row<DType::kBF16>(x, k, g, stream_of(l));
  return false;
}

}  // namespace kvf::exec::cuda::step
