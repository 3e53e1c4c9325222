// Which kernel runs a linear group (one x [m, k] times up to three weight matrices that share
// it, a norm in front and a gated unit or residual add behind) on a CUDA device. The kernels
// themselves say which shapes they can take at all (stored type, k's alignment, shared
// memory, the device's architecture: exec/cuda/step); this picks among those, by the rows of
// x, at the crossings measured on TinyLlama-1.1B's layers (docs/benchmarks.md, docs/cuda.md).
// Header-only, as gemm_rows_schedule.h, so that bench/cuda builds without the library.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "plan/gemm_rows_schedule.h"

namespace kvf::plan {

enum class LinearKernel : uint8_t {
  kGemvOneRow,    // one row of x held in registers, each block's weight rows bulk-copied
  kGemvRegister,  // 1 or 2 rows, weights through registers, few blocks (each recomputes 1/rms)
  kGemvBulk,      // up to kGemvMaxRows rows, each block's weight rows bulk-copied
  kGemvWarps,     // up to kGemvMaxRows rows, a warp a column: any stored type
  kGemmRows,      // kGemmRowsMin..kGemmRowsMax rows of 16-bit weights on the tensor cores
  kGemmStream,    // kGemmStreamMin..kGemmStreamMax rows on Hopper: TMA and wgmma
  kCublasLt,      // from kTensorCoreRows rows: cuBLASLt
  kTiles,         // any shape: f32 SIMT tiles, the norm, gated unit and residual apart
};

// The decode kernels' reach, and where cuBLASLt starts: past the decode kernels, whose
// registers hold every row of x.
inline constexpr int64_t kGemvMaxRows = 8;
inline constexpr int64_t kTensorCoreRows = kGemvMaxRows + 1;
// The register kernel takes a group with a fused norm up to this many rows: its blocks are
// fewer than the bulk-copy kernel's, so fewer of them recompute 1/rms over x.
inline constexpr int64_t kGemvRegisterMaxRows = 2;

// A set of kernels: those that can run one group.
class LinearKernels {
 public:
  constexpr LinearKernels() = default;
  constexpr LinearKernels(std::initializer_list<LinearKernel> ks) {
    for (LinearKernel k : ks) add(k);
  }
  constexpr void add(LinearKernel k) { bits_ |= bit(k); }
  constexpr void remove(LinearKernel k) { bits_ &= ~bit(k); }
  constexpr bool has(LinearKernel k) const { return (bits_ & bit(k)) != 0; }

 private:
  static constexpr uint32_t bit(LinearKernel k) { return uint32_t{1} << static_cast<int>(k); }
  uint32_t bits_ = 0;
};

struct LinearGroupShape {
  int64_t m = 0;      // rows of x
  int parts = 1;      // weight matrices (q, k and v: 3; gate and up: 2)
  bool norm = false;  // an RMSNorm of x in front
};

// The kernel for a group, among `can` (kTiles whether or not it is there: it runs anything).
//   1 row: the one-row kernel (37.3 us a TinyLlama layer's four linears on an H100, against
//     50.3 for the register and bulk-copy kernels);
//   kGemmRowsMin..kGemmRowsMax rows of 16-bit weights: gemm_rows (its tiles of x on the
//     tensor cores stay bound by the weight bytes, where the gemv kernels' x in registers
//     runs out of them: 81 us a layer at 8 rows against 105 on the register kernel);
//   kGemmStreamMin..kGemmStreamMax rows, the groups gemm_stream_chosen picks: gemm_stream;
//   up to kGemvMaxRows rows otherwise: the register kernel behind a fused norm for 1-2 rows,
//     else the bulk-copy kernel, else a warp a column;
//   more rows: cuBLASLt, else the SIMT tiles.
inline LinearKernel linear_kernel(const LinearGroupShape& g, LinearKernels can) {
  using K = LinearKernel;
  if (g.m == 1 && can.has(K::kGemvOneRow)) return K::kGemvOneRow;
  if (g.m >= kGemmRowsMin && g.m <= kGemmRowsMax && can.has(K::kGemmRows)) return K::kGemmRows;
  if (gemm_stream_chosen(g.m, g.parts) && can.has(K::kGemmStream)) return K::kGemmStream;
  if (g.m >= 1 && g.m <= kGemvMaxRows) {
    if (g.norm && g.m <= kGemvRegisterMaxRows && can.has(K::kGemvRegister)) return K::kGemvRegister;
    if (can.has(K::kGemvBulk)) return K::kGemvBulk;
    if (can.has(K::kGemvWarps)) return K::kGemvWarps;
  }
  if (g.m >= kTensorCoreRows && can.has(K::kCublasLt)) return K::kCublasLt;
  return K::kTiles;
}

// Whether a group running on `k` takes its x already rounded to 16 bits from the op in front
// (the glu group's stored copy) instead of rounding x in a launch of its own: gemm_rows and
// cuBLASLt do. The streaming kernel keeps its rounding launch: straight behind the glu group,
// its clusters took their places while that group's blocks still held the SMs, and 32 rows
// of decode ran 2-3% slower on an H100 (docs/benchmarks.md).
inline bool takes_rounded_x(LinearKernel k) { return k == LinearKernel::kGemmRows || k == LinearKernel::kCublasLt; }

}  // namespace kvf::plan
