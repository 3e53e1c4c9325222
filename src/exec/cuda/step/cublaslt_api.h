// The cuBLASLt entry points the tensor-core linears call, resolved from the toolkit's
// libcublasLt.so.<major> the first time a GPU opens (runtime_library.h says why not at start).
#pragma once

#include <cublasLt.h>

namespace kvf::exec::cuda::step {

struct CublasLt {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

// The loaded entry points; null when the library or any of them is missing (the linears of
// many rows then stay on the SIMT kernels).
const CublasLt* cublaslt();

}  // namespace kvf::exec::cuda::step
