// cuBLASLt loaded by the soname of the major version the headers describe.
#include "exec/cuda/step/cublaslt_api.h"

#include <string>

#include "exec/cuda/step/runtime_library.h"

namespace kvf::exec::cuda::step {

const CublasLt* cublaslt() {
  static const CublasLt* const loaded = [] () -> const CublasLt* {
    static RuntimeLibrary lib(("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)).c_str());
    static CublasLt api;
    lib.resolve(api.create, "cublasLtCreate");
    lib.resolve(api.destroy, "cublasLtDestroy");
    lib.resolve(api.desc_create, "cublasLtMatmulDescCreate");
    lib.resolve(api.desc_destroy, "cublasLtMatmulDescDestroy");
    lib.resolve(api.desc_set, "cublasLtMatmulDescSetAttribute");
    lib.resolve(api.layout_create, "cublasLtMatrixLayoutCreate");
    lib.resolve(api.layout_destroy, "cublasLtMatrixLayoutDestroy");
    lib.resolve(api.pref_create, "cublasLtMatmulPreferenceCreate");
    lib.resolve(api.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    lib.resolve(api.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    lib.resolve(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    lib.resolve(api.matmul, "cublasLtMatmul");
    return lib.error().empty() ? &api : nullptr;
  }();
  return loaded;
}

}  // namespace kvf::exec::cuda::step
