// Hopper warpgroup MMA (wgmma, sm_90a only): shared-memory matrix descriptors for the
// 128-byte-swizzled tiles TMA writes, and the m64nNk16 forms the prefill and batched-decode
// kernels use (A and B from shared memory; A from registers with B transposed). Thin
// wrappers over inline PTX; the layouts are in docs/cuda.md ("Prefill on wgmma").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvf::exec::cuda::detail::wgmma {

// Tiles are [rows, D] 16-bit, stored as D / 64 blocks of 64 columns, each [rows][64] with
// 128-byte rows whose 16-byte chunks are XOR-swizzled by row % 8: the hardware's 128B
// swizzle when a block starts on a 1024-byte boundary (what TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B).

// Matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets (all
// in 16-byte units in the descriptor). K-major operands (the reduction dim contiguous): SBO
// is the step between groups of 8 rows (1024 bytes), LBO unused. MN-major operands: LBO is
// the step between 64-element column blocks, SBO between groups of 8 rows of the reduction dim.
__device__ __forceinline__ uint64_t desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3fff) | (static_cast<uint64_t>((lbo >> 4) & 0x3fff) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3fff) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// Keeps the compiler from moving reads or writes of an accumulator across a wgmma wait:
// the registers are written asynchronously until then.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define KVF_WG_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KVF_WG_F8(d, i) KVF_WG_F4(d, i), KVF_WG_F4(d, i + 4)
#define KVF_WG_F16(d, i) KVF_WG_F4(d, i), KVF_WG_F4(d, i + 4), KVF_WG_F4(d, i + 8), KVF_WG_F4(d, i + 12)
#define KVF_WG_F32(d, i) KVF_WG_F16(d, i), KVF_WG_F16(d, i + 16)
#define KVF_WG_F64(d, i) KVF_WG_F32(d, i), KVF_WG_F32(d, i + 32)
#define KVF_WG_F128(d) KVF_WG_F64(d, 0), KVF_WG_F64(d, 64)
// The accumulator register lists "{%0, ..., %(n - 1)}".
#define KVF_WG_D4 "{%0, %1, %2, %3}"
#define KVF_WG_D8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define KVF_WG_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define KVF_WG_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define KVF_WG_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63}"
#define KVF_WG_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
  "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
  "%123, %124, %125, %126, %127}"
// One wgmma of shape m64n<n>k16 with f32 accumulation over 16-bit type ty: A and B from
// shared memory (K-major), or A from registers and B MN-major (imm-trans-b 1). Operand ia is
// the first after the accumulators.
#define KVF_WG_SS(n, ty, regs, outs, ia, ib)                                                                  \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." ty "." ty " " regs ", %" #ia ", %" #ib       \
               ", 1, 1, 1, 0, 0;"                                                                             \
               : outs                                                                                         \
               : "l"(da), "l"(db))
#define KVF_WG_RS_T(n, ty, regs, outs, i0, i1, i2, i3, ib)                                                    \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." ty "." ty " " regs ", {%" #i0 ", %" #i1     \
               ", %" #i2 ", %" #i3 "}, %" #ib ", 1, 1, 1, 1;"                                                 \
               : outs                                                                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))

// d[64 x N] += A[64 x 16] * B[16 x N], N 8, 16, 32, 64 or 128: A and B K-major in shared
// memory. Per thread, d holds rows 16 w + lane / 4 (+ 8 for d[4 i + 2..3]) of the
// warpgroup's warp w, columns 8 i + 2 (lane % 4) + {0, 1}: the mma.sync m16n8 C layout, N / 8
// n8 tiles.
template <bool kF16, int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t da, uint64_t db) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128, "n of 8, 16, 32, 64 or 128");
  if constexpr (N == 8) {
    if constexpr (kF16) KVF_WG_SS(8, "f16", KVF_WG_D4, KVF_WG_F4(d, 0), 4, 5);
    else KVF_WG_SS(8, "bf16", KVF_WG_D4, KVF_WG_F4(d, 0), 4, 5);
  } else if constexpr (N == 16) {
    if constexpr (kF16) KVF_WG_SS(16, "f16", KVF_WG_D8, KVF_WG_F8(d, 0), 8, 9);
    else KVF_WG_SS(16, "bf16", KVF_WG_D8, KVF_WG_F8(d, 0), 8, 9);
  } else if constexpr (N == 32) {
    if constexpr (kF16) KVF_WG_SS(32, "f16", KVF_WG_D16, KVF_WG_F16(d, 0), 16, 17);
    else KVF_WG_SS(32, "bf16", KVF_WG_D16, KVF_WG_F16(d, 0), 16, 17);
  } else if constexpr (N == 64) {
    if constexpr (kF16) KVF_WG_SS(64, "f16", KVF_WG_D32, KVF_WG_F32(d, 0), 32, 33);
    else KVF_WG_SS(64, "bf16", KVF_WG_D32, KVF_WG_F32(d, 0), 32, 33);
  } else {
    if constexpr (kF16) KVF_WG_SS(128, "f16", KVF_WG_D64, KVF_WG_F64(d, 0), 64, 65);
    else KVF_WG_SS(128, "bf16", KVF_WG_D64, KVF_WG_F64(d, 0), 64, 65);
  }
}

// d[64 x N] += A[64 x 16] * B[16 x N], N 64, 128 or 256: A from registers (the mma.sync
// m16n8k16 A layout per warp), B MN-major (transposed) in shared memory; d as in mma_ss.
template <bool kF16, int N>
__device__ __forceinline__ void mma_rs_t(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
  static_assert(N == 64 || N == 128 || N == 256, "O tiles of head dim 64, 128 or 256");
  if constexpr (N == 64) {
    if constexpr (kF16) KVF_WG_RS_T(64, "f16", KVF_WG_D32, KVF_WG_F32(d, 0), 32, 33, 34, 35, 36);
    else KVF_WG_RS_T(64, "bf16", KVF_WG_D32, KVF_WG_F32(d, 0), 32, 33, 34, 35, 36);
  } else if constexpr (N == 128) {
    if constexpr (kF16) KVF_WG_RS_T(128, "f16", KVF_WG_D64, KVF_WG_F64(d, 0), 64, 65, 66, 67, 68);
    else KVF_WG_RS_T(128, "bf16", KVF_WG_D64, KVF_WG_F64(d, 0), 64, 65, 66, 67, 68);
  } else {
    if constexpr (kF16) KVF_WG_RS_T(256, "f16", KVF_WG_D128, KVF_WG_F128(d), 128, 129, 130, 131, 132);
    else KVF_WG_RS_T(256, "bf16", KVF_WG_D128, KVF_WG_F128(d), 128, 129, 130, 131, 132);
  }
}

#undef KVF_WG_RS_T
#undef KVF_WG_SS
#undef KVF_WG_D128
#undef KVF_WG_D64
#undef KVF_WG_D32
#undef KVF_WG_D16
#undef KVF_WG_D8
#undef KVF_WG_D4
#undef KVF_WG_F128
#undef KVF_WG_F64
#undef KVF_WG_F32
#undef KVF_WG_F16
#undef KVF_WG_F8
#undef KVF_WG_F4

}  // namespace kvf::exec::cuda::detail::wgmma
