// Linear layers of many rows on the tensor cores, through cuBLASLt. The step's x is f32;
// it is rounded into the executor's scratch in the weights' 16-bit type, quantized weights
// are widened there to f16, and cuBLASLt multiplies with f32 accumulation straight into the
// f32 output, the bias added by its epilogue. Descriptors and the algorithm are chosen on
// the host when the launch is enqueued (once, since the step is captured as a graph).
#include "exec/cuda/step/cublaslt_api.h"
#include "exec/cuda/step/launch.cuh"

namespace kvf::exec::cuda::step {
namespace {

bool quantized(DType dt) { return dt == DType::kQ8_0 || dt == DType::kQ4_0; }

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Each stored element widened to f32 and rounded to f16: a q8_0/q4_0 matrix as f16 [n, k].
__global__ void widen_to_f16_kernel(DType dt, const uint8_t* w, int64_t row_bytes, int64_t n, int64_t k, __half* out) {
  for (const int64_t i : grid_stride(n * k)) {
    out[i] = __float2half_rn(load_stored(dt, w + (i / k) * row_bytes, i % k));
  }
}

// The largest power of two (up to 256) that divides the address: cuBLASLt's heuristic must
// not pick an algorithm that assumes more.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// The library's entry points: loaded, since a launch only gets here with a handle it made.
const CublasLt& lt() { return *cublaslt(); }

// The descriptors of one product, freed together.
struct Product {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Product() {
    if (pref) lt().pref_destroy(pref);
    if (c) lt().layout_destroy(c);
    if (b) lt().layout_destroy(b);
    if (a) lt().layout_destroy(a);
    if (op) lt().desc_destroy(op);
  }
};

template <typename T>
bool set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return lt().desc_set(d, attr, &v, sizeof v) == CUBLAS_STATUS_SUCCESS;
}

template <typename T>
bool set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  return lt().pref_set(p, attr, &v, sizeof v) == CUBLAS_STATUS_SUCCESS;
}

// Row-major out [m, n] = x16 [m, k] . w16 [n, k]^T (+ c [m, n]) is, column-major, out^T =
// w16^T . x16^T (+ c^T): A = w16 (k x n, leading k, transposed), B = x16 (k x m, leading
// k), C (c, or out when there is none) and D = out share the layout n x m. Chooses the
// algorithm (false: none); multiply() then enqueues the product.
bool plan_product(const Launch& l, cudaDataType_t ab, const void* w16, const void* x16, const float* bias, const float* c,
                  const float* out, int64_t m, int64_t n, int64_t k, Product& p, cublasLtMatmulAlgo_t& algo) {
  const auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  if (!ok(lt().desc_create(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F))) return false;
  if (!set_desc(p.op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T) || !set_desc(p.op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N)) {
    return false;
  }
  if (bias != nullptr) {
    if (!set_desc(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS) ||
        !set_desc(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias) ||
        !set_desc(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F)) {
      return false;
    }
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  if (!ok(lt().layout_create(&p.a, ab, u(k), u(n), k)) || !ok(lt().layout_create(&p.b, ab, u(k), u(m), k)) ||
      !ok(lt().layout_create(&p.c, CUDA_R_32F, u(n), u(m), n)) || !ok(lt().pref_create(&p.pref))) {
    return false;
  }
  if (!set_pref(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(l.tc.workspace_bytes)) ||
      !set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(w16)) ||
      !set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(x16)) ||
      !set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(c != nullptr ? c : out)) ||
      !set_pref(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(out))) {
    return false;
  }
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  if (!ok(lt().heuristic(static_cast<cublasLtHandle_t>(l.tc.handle), p.op, p.a, p.b, p.c, p.c, p.pref, 1, &best,
                         &found)) ||
      found == 0) {
    return false;
  }
  algo = best.algo;
  return true;
}

// Enqueues a planned product: out = w16 . x16 (+ bias) (+ c). False when cuBLASLt refuses it.
bool multiply(const Launch& l, const Product& p, const cublasLtMatmulAlgo_t& algo, const void* w16, const void* x16,
              const float* c, float* out) {
  const float alpha = 1.0f, beta = c != nullptr ? 1.0f : 0.0f;
  return lt().matmul(static_cast<cublasLtHandle_t>(l.tc.handle), p.op, &alpha, w16, p.a, x16, p.b, &beta,
                     c != nullptr ? c : out, p.c, out, p.c, &algo, l.tc.workspace,
                     static_cast<size_t>(l.tc.workspace_bytes), stream_of(l)) == CUBLAS_STATUS_SUCCESS;
}

// The weights cuBLASLt reads: 16-bit ones as they are, quantized ones widened into the
// scratch (after x16) first.
const void* product_weights(const void* w, DType w_dt, int64_t m, int64_t k, const Launch& l) {
  if (!quantized(w_dt)) return w;
  return static_cast<uint8_t*>(l.tc.scratch) + aligned(m * k * 2);
}

void widen_weights(const void* w, DType w_dt, int64_t n, int64_t k, void* widened, const Launch& l) {
  widen_to_f16_kernel<<<blocks_for(n * k), kThreads, 0, stream_of(l)>>>(
      w_dt, static_cast<const uint8_t*>(w), stored_row_bytes(w_dt, k), n, k, static_cast<__half*>(widened));
}

DType half_of(DType w_dt) { return w_dt == DType::kBF16 ? DType::kBF16 : DType::kF16; }
cudaDataType_t cuda_type(DType half) { return half == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }

}  // namespace

bool tensor_core_fits(int64_t m, int64_t k, DType w_dt) {
  const bool typed = w_dt == DType::kF16 || w_dt == DType::kBF16 || quantized(w_dt);
  return typed && m >= plan::kTensorCoreRows && k % 8 == 0;
}

int64_t tensor_core_scratch_bytes(int64_t m, int64_t k, int64_t n, DType w_dt) {
  if (!tensor_core_fits(m, k, w_dt)) return 0;
  return aligned(m * k * 2) + (quantized(w_dt) ? aligned(n * k * 2) : 0);
}

bool linear_tensor_cores(const float* x, int64_t m, int64_t k, DType w_dt, const void* w, int64_t n,
                         const float* bias, float* out, const Launch& l) {
  if (l.tc.handle == nullptr || !tensor_core_fits(m, k, w_dt) ||
      l.tc.scratch_bytes < tensor_core_scratch_bytes(m, k, n, w_dt)) {
    return false;
  }
  const DType half = half_of(w_dt);
  void* x16 = l.tc.scratch;
  const void* w16 = product_weights(w, w_dt, m, k, l);
  Product p;
  cublasLtMatmulAlgo_t algo{};
  if (!plan_product(l, cuda_type(half), w16, x16, bias, nullptr, out, m, n, k, p, algo)) return false;
  if (quantized(w_dt)) widen_weights(w, w_dt, n, k, const_cast<void*>(w16), l);
  cast(DType::kF32, half, x, x16, m * k, l);
  // Refused at enqueue: the caller's kernel overwrites out; the conversions were harmless.
  return multiply(l, p, algo, w16, x16, nullptr, out);
}

bool linear_group_tensor_cores(const float* x, int64_t m, int64_t k, DType w_dt, const LinearGroup& g, const Launch& l) {
  if (l.tc.handle == nullptr || !tensor_core_fits(m, k, w_dt) || g.parts < 1 || (g.glu && g.parts != 2)) return false;
  const bool residual = g.residual_out != nullptr;
  if (residual && g.parts != 1) return false;
  const DType half = half_of(w_dt);
  const void* x16 = g.x16 != nullptr ? g.x16 : l.tc.scratch;
  Product prod[3];
  cublasLtMatmulAlgo_t algo[3] = {};
  const void* w16[3];
  for (int p = 0; p < g.parts; ++p) {
    const LinearPart& part = g.part[p];
    if (l.tc.scratch_bytes < tensor_core_scratch_bytes(m, k, part.n, w_dt)) return false;
    w16[p] = product_weights(part.w, w_dt, m, k, l);
    float* out = residual ? g.residual_out : part.out;
    if (!plan_product(l, cuda_type(half), w16[p], x16, part.bias, residual ? g.residual : nullptr, out, m, part.n, k,
                      prod[p], algo[p])) {
      return false;
    }
  }
  if (g.x16 == nullptr) round_group_x(x, m, k, half, g, l.tc.scratch, l);
  for (int p = 0; p < g.parts; ++p) {
    const LinearPart& part = g.part[p];
    if (quantized(w_dt)) widen_weights(part.w, w_dt, part.n, k, const_cast<void*>(w16[p]), l);
    // Refused at enqueue (cuBLASLt planned it, so this is not expected): the caller's
    // kernels then compute the whole group again over what this wrote.
    if (!multiply(l, prod[p], algo[p], w16[p], x16, residual ? g.residual : nullptr, residual ? g.residual_out : part.out)) {
      return false;
    }
  }
  if (g.glu) glu(g.act, g.part[0].out, g.part[1].out, g.glu_out, m * g.part[0].n, l, g.glu_out16, g.glu_out16_bf16);
  return true;
}

void* tensor_cores_open() {
  if (cublaslt() == nullptr) return nullptr;
  cublasLtHandle_t h = nullptr;
  return lt().create(&h) == CUBLAS_STATUS_SUCCESS ? h : nullptr;
}

void tensor_cores_close(void* handle) noexcept {
  if (handle != nullptr) lt().destroy(static_cast<cublasLtHandle_t>(handle));
}

}  // namespace kvf::exec::cuda::step
