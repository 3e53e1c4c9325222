// Hopper warpgroup MMA (wgmma, sm_90a only): shared-memory matrix descriptors for the
// 128-byte-swizzled tiles the kernels build with cp.async, and the two m64n128k16 forms the
// prefill kernel uses (A and B from shared memory; A from registers with B transposed).
// Thin wrappers over inline PTX; the layouts are in docs/cuda.md ("Prefill on wgmma").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvf::exec::cuda::detail::wgmma {

// A [rows, 128] 16-bit tile stored as two halves of 64 columns (d 0-63, then 64-127), each
// [rows][64] with 128-byte rows whose 16-byte chunks are XOR-swizzled by row % 8: the
// hardware's 128B swizzle when the tile starts on a 1024-byte boundary. Byte offset of
// (row r, 16-byte chunk c of 16).
__device__ __forceinline__ uint32_t sw128_offset(int rows, int r, int c) {
  return static_cast<uint32_t>((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

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
// Orders generic-proxy writes to shared memory (cp.async, st.shared) before async-proxy
// reads of it (wgmma operands).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Keeps the compiler from moving reads or writes of an accumulator across a wgmma wait:
// the registers are written asynchronously until then.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define KVF_WG_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KVF_WG_F16(d, i) KVF_WG_F4(d, i), KVF_WG_F4(d, i + 4), KVF_WG_F4(d, i + 8), KVF_WG_F4(d, i + 12)
#define KVF_WG_F64(d) KVF_WG_F16(d, 0), KVF_WG_F16(d, 16), KVF_WG_F16(d, 32), KVF_WG_F16(d, 48)
#define KVF_WG_D64                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "   \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
  "%62, %63}"

// d[64 x 128] += A[64 x 16] * B[16 x 128]: A and B K-major in shared memory. Per thread, d
// holds rows 16 w + lane / 4 (+ 8 for d[4 i + 2..3]) of the warpgroup's warp w, columns
// 8 i + 2 (lane % 4) + {0, 1}: the mma.sync m16n8 C layout, 16 n8 tiles.
template <bool kF16>
__device__ __forceinline__ void mma_ss(float (&d)[64], uint64_t da, uint64_t db) {
  if constexpr (kF16) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " KVF_WG_D64 ", %64, %65, 1, 1, 1, 0, 0;"
                 : KVF_WG_F64(d) : "l"(da), "l"(db));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KVF_WG_D64 ", %64, %65, 1, 1, 1, 0, 0;"
                 : KVF_WG_F64(d) : "l"(da), "l"(db));
  }
}

// d[64 x 128] += A[64 x 16] * B[16 x 128]: A from registers (the mma.sync m16n8k16 A
// layout per warp), B MN-major (transposed) in shared memory.
template <bool kF16>
__device__ __forceinline__ void mma_rs_t(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (kF16) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " KVF_WG_D64
                 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;"
                 : KVF_WG_F64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " KVF_WG_D64
                 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 1;"
                 : KVF_WG_F64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
  }
}

#undef KVF_WG_D64
#undef KVF_WG_F64
#undef KVF_WG_F16
#undef KVF_WG_F4

}  // namespace kvf::exec::cuda::detail::wgmma
