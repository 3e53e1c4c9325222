// Private to the linear kernels: the arguments every ISA body shares and the table of one
// ISA's kernels. linear.cpp splits the work into tasks and threads; the linear_<isa>.cpp
// files only compute. linear_scalar.cpp is the plain version the others must agree with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "exec/cpu/linear.h"

namespace kvf::exec::cpu::detail {

inline constexpr int64_t kQBlock = 32;  // elements per q8_0/q4_0 block, and per x block

// x rows quantized for the integer dot products with q8_0/q4_0 weights. The rule is the
// same on every ISA, so all bodies see identical integers: per block of 32 values,
// amax = max |x|, d = amax / 127, q = round-half-even(x * (127 / amax)) (all 0 when amax
// is 0), so x ≈ d·q with |q| <= 127. Only the storage of q differs (see QuantForm).
struct QuantX {
  int8_t* q = nullptr;      // [m, k]: q, or q + 128 as a byte when stored unsigned
  float* d = nullptr;       // [m, k/32]
  int32_t* corr = nullptr;  // [m, k/32, 8] per-lane corrections (QuantForm::kLaneCorr only)
  int32_t* sums = nullptr;  // [m, k/32] the sum of each block's q (q4_k and q5_k weights only)
};

// How the quantized rows are stored, chosen by the ISA for the kernel that follows.
enum class QuantForm {
  kSigned,    // q as int8
  kUnsigned,  // q + 128 as uint8 (the unsigned operand of vpdpbusd)
  // q as int8, plus corr[b][l] = -offset · sum of q over elements 4l..4l+3 of block b, with
  // offset 128 for q8_0 (weights read as w + 128), 8 for q4_0 and 32 for q6_k (their
  // quants read unbiased): lane_offset().
  kLaneCorr,
};

inline int lane_offset(DType wt) {
  switch (wt) {
    case DType::kQ8_0: return 128;
    case DType::kQ4_0: return 8;
    case DType::kQ6_K: return 32;
    default: return 0;
  }
}

// Whether x's block sums are needed: the mins of q4_k and q5_k multiply them.
inline bool needs_sums(DType wt) { return wt == DType::kQ4_K || wt == DType::kQ5_K; }

// The order of the sums. Every body adds the products of one output in this order, so an
// output's bits depend on its x row and weight row only: not on the body, on how many other
// rows the call holds, on streaming or packing, or on the threads. That makes a request's
// tokens independent of the batch it runs in (docs/architecture.md, batch invariance).
//   float weights: lane l (of kDotLanes) sums the products of elements c = l (mod 16) in
//     increasing c, each a fused multiply-add onto the lane (elements past k add 0·0); the
//     lanes then add pairwise, t[l] + t[l + 8], then + 4, + 2, + 1 (reduce_lanes).
//   q8_0/q4_0: each block's integer dot is exact; the blocks add in increasing order as
//     fma(float(dot), dw·dx, acc) from acc = 0.
//   k-quants, per 32-element chunk of a super-block (core/kquants.h) and the x block it meets,
//     in increasing order from acc = 0, every integer exact:
//     q4_k, q5_k: acc = fma(float(Σ q·qx), dsc·dx, acc); acc = fma(-dmn, float(Σ qx)·dx, acc)
//     q6_k:       acc = fma(float(sc0·Σ₀ (q - 32)·qx + sc1·Σ₁ (q - 32)·qx), d·dx, acc)
//                 (Σ₀ over the chunk's first 16 elements, Σ₁ over the last 16)
//   bias: added last, y = sum + bias[j] (nothing added without one).
inline constexpr int kDotLanes = 16;

// The lane tree above, written out for the scalar body and the tests.
inline float reduce_lanes(const float (&t)[kDotLanes]) {
  float h8[8], h4[4];
  for (int l = 0; l < 8; ++l) h8[l] = t[l] + t[l + 8];
  for (int l = 0; l < 4; ++l) h4[l] = h8[l] + h8[l + 4];
  return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

// One call of linear(): y[i, j] = x[i, :] · w[j, :] + bias[j].
struct LinearArgs {
  const float* x = nullptr;
  int64_t m = 0;
  int64_t x_stride = 0;
  WeightView w;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;
  int64_t y_stride = 0;
  QuantX xq;  // filled before the kernels run when w is q8_0/q4_0
};

// Memory aligned for full-width vector loads, reused across calls (grows, never shrinks):
// the packing and quantization scratch of a thread.
class AlignedBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes > size_) {
      size_ = (bytes + 4095) / 4096 * 4096;
      ptr_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, size_)));
    }
    return ptr_.get();
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> ptr_;
  size_t size_ = 0;
};

// A thread's packed weight panel; `j0` names the columns it holds (-1: none) so consecutive
// tasks on the same panel pack it once. Reset per job by the driver. With `packed` set the
// weights were packed ahead (PackedWeights): panel p lies at packed + p * packed_panel_bytes.
struct PanelCache {
  AlignedBuffer buf;
  int64_t j0 = -1;
  const uint8_t* packed = nullptr;
  int64_t packed_panel_bytes = 0;
};

inline constexpr int64_t kWideWeightRows = 16384;

// The kernels of one instruction set.
struct Kernels {
  const char* isa;
  // GEMM tasks split the columns at multiples of this (the packed panel width).
  int64_t panel_cols;
  // Calls with at most this many x rows stream the weights instead of packing them, for
  // float and for q8_0/q4_0 weights (the crossovers measured for each body), and for
  // q8_0/q4_0 weights of at least kWideWeightRows rows (the logits), whose packing costs
  // more per call.
  int64_t stream_rows_float, stream_rows_quant, stream_rows_quant_wide;
  // The quantized form `stream` (stream == true) or `gemm` expects for this weight type.
  QuantForm (*quant_form)(DType wt, bool stream);
  // Quantizes rows [i0, i1) of a.x into a.xq in the given form.
  void (*quantize)(const LinearArgs& a, int64_t i0, int64_t i1, QuantForm form);
  // Streams weight rows [j0, j1) once, dotting each with x rows [i0, i1): decode and small m.
  void (*stream)(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1);
  // Rows [i0, i1) × columns [j0, j1) through packed panels; j0 is a multiple of panel_cols.
  void (*gemm)(const LinearArgs& a, int64_t i0, int64_t i1, int64_t j0, int64_t j1, PanelCache& panel);
  // Packing ahead (null where gemm takes no packed panels): the bytes of one panel of w (0:
  // this weight type is not packed ahead), and columns [j0, j1) of w packed into `panel`.
  int64_t (*panel_bytes)(const WeightView& w);
  void (*pack)(const WeightView& w, int64_t j0, int64_t j1, void* panel);
};

// The body named "avx512", "avx2" or "scalar", or null when this CPU cannot run it.
const Kernels* kernels_for(std::string_view isa);
// linear() on a chosen body: tests and benchmarks compare every body this CPU can run.
// packed: made for this body (pack_weights_with) or null.
void linear_with(const Kernels& kern, ThreadPool& pool, const float* x, int64_t m, int64_t x_stride,
                 const WeightView& w, const float* bias, float* y, int64_t y_stride,
                 const PackedWeights* packed = nullptr);
std::shared_ptr<const PackedWeights> pack_weights_with(const Kernels& kern, ThreadPool& pool, const WeightView& w,
                                                       int64_t m);

const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

// Scalar helpers shared by the bodies (defined in linear_scalar.cpp).
void quantize_block(const float* x, int8_t* q, float* d);  // one block of 32, the rule above
void quantize_rows_scalar(const LinearArgs& a, int64_t i0, int64_t i1, QuantForm form);
// Chunk b (of 32 elements) of a k-quant row, dotted with 32 signed q values in the order
// above; xsum = their sum (q4_k, q5_k).
float kquant_chunk_dot(DType wt, const void* row, int64_t b, const int8_t* q, float dx, int32_t xsum, float acc);
// Integer dot of block `b` of weight row `row` (q8_0/q4_0) with 32 signed q values.
int32_t quant_block_dot(DType wt, const void* row, int64_t b, const int8_t* q);
// The f16 scale of block `b` of a q8_0/q4_0 row, as f32.
float quant_block_scale(DType wt, const void* row, int64_t b);
// Bytes of one stored weight row.
int64_t row_bytes(const WeightView& w);

}  // namespace kvf::exec::cpu::detail
