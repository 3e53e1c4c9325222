// Every algorithm cuBLASLt offers for the batched-decode products of a TinyLlama-1.1B layer
// (out [m, n] = x [m, k] . w [n, k]^T, f16 operands, f32 out, as exec/cuda/step/tensor_cores.cu
// asks for them) against its first pick, which the step keeps: 16, 32 and 64 rows of x, the
// products q/k/v together (n 2560), o, one of gate/up and down. Each algorithm runs 22 layers'
// own weights (nothing is served from L2) captured as one graph; the median time a product.
//
//   bench_cuda_cublaslt
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "event_timer.h"

namespace {

constexpr int kLayers = 22, kMaxAlgos = 64;
constexpr size_t kWorkspace = 32 << 20;  // the step's

#define KVF_LT_CHECK(call)                                                          \
  do {                                                                              \
    const cublasStatus_t s_ = (call);                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #call, s_); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

struct Shape {
  const char* name;
  int n, k;
};

void* filled(size_t bytes) {
  void* p = nullptr;
  KVF_BENCH_CHECK(cudaMalloc(&p, bytes));
  KVF_BENCH_CHECK(cudaMemset(p, 0x1c, bytes));  // f16 ~0.004
  return p;
}

// One product's descriptors: column-major out^T [n, m] = w^T . x^T, as the step plans it.
struct Product {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  Product(int m, int n, int k) {
    KVF_LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    KVF_LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KVF_LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    KVF_LT_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, k, n, k));
    KVF_LT_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, k, m, k));
    KVF_LT_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, n, m, n));
  }
  ~Product() {
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

int main() {
  cublasLtHandle_t lt = nullptr;
  KVF_LT_CHECK(cublasLtCreate(&lt));
  void* workspace = filled(kWorkspace);
  const Shape shapes[] = {{"qkv", 2560, 2048}, {"o", 2048, 2048}, {"gate", 5632, 2048}, {"down", 2048, 5632}};
  std::printf("cuBLASLt on TinyLlama-1.1B layer products, f16 x f16 -> f32, %d layers per graph\n", kLayers);
  std::printf("%4s %-5s %6s %6s %6s | %10s %7s | %10s %7s %5s\n", "rows", "prod", "n", "k", "algos", "first us",
              "TB/s", "best us", "TB/s", "which");
  for (const int m : {16, 32, 64}) {
    for (const Shape& s : shapes) {
      const size_t w_bytes = static_cast<size_t>(s.n) * s.k * 2;
      std::vector<void*> w(kLayers);
      for (void*& p : w) p = filled(w_bytes);
      void* x = filled(static_cast<size_t>(m) * s.k * 2);
      void* out = filled(static_cast<size_t>(m) * s.n * 4);
      const Product p(m, s.n, s.k);
      cublasLtMatmulPreference_t pref = nullptr;
      KVF_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t ws = kWorkspace;
      KVF_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
      cublasLtMatmulHeuristicResult_t found[kMaxAlgos];
      int count = 0;
      KVF_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, kMaxAlgos, found, &count));
      const float alpha = 1.0f, beta = 0.0f;
      double first = -1.0, best = 1e30;
      int which = -1;
      for (int i = 0; i < count; ++i) {
        auto product = [&](int layer, cudaStream_t st) {
          return cublasLtMatmul(lt, p.op, &alpha, w[static_cast<size_t>(layer)], p.a, x, p.b, &beta, out, p.c, out, p.c,
                                &found[i].algo, workspace, kWorkspace, st);
        };
        // An algorithm the library refuses at enqueue is skipped; the first pick never is.
        if (product(0, nullptr) != CUBLAS_STATUS_SUCCESS) continue;
        KVF_BENCH_CHECK(cudaDeviceSynchronize());
        const double us = 1e3 * kvf::bench_cuda::median_graph_ms(2, 9, kLayers, [&](int layer, cudaStream_t st) {
                            KVF_LT_CHECK(product(layer, st));
                          });
        if (i == 0) first = us;
        if (us < best) best = us, which = i;
      }
      std::printf("%4d %-5s %6d %6d %6d | %10.2f %7.2f | %10.2f %7.2f %5d\n", m, s.name, s.n, s.k, count, first,
                  static_cast<double>(w_bytes) / first / 1e6, best, static_cast<double>(w_bytes) / best / 1e6, which);
      KVF_LT_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      for (void* q : w) KVF_BENCH_CHECK(cudaFree(q));
      KVF_BENCH_CHECK(cudaFree(x));
      KVF_BENCH_CHECK(cudaFree(out));
    }
  }
  KVF_BENCH_CHECK(cudaFree(workspace));
  KVF_LT_CHECK(cublasLtDestroy(lt));
  return 0;
}
