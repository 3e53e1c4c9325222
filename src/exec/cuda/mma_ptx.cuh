// The sm_80+ instructions the tensor-core kernels share (prefill and decode): cp.async into
// shared memory, ldmatrix, mma.sync m16n8k16 with f32 accumulation, 16-bit packing, and the
// XOR swizzle of [rows, D] 16-bit tiles. Thin wrappers over inline PTX, no policy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kvf::exec::cuda::detail {

inline constexpr float kLog2e = 1.4426950408889634f;  // scores live in the log2 domain (exp2)

}  // namespace kvf::exec::cuda::detail

namespace kvf::exec::cuda::detail::ptx {

// 16-byte global -> shared copy that bypasses L1; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 4-byte global -> shared copy (through L1: .cg takes 16 bytes only); src_bytes 0 writes zero.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// c += a * b, m16n8k16, f32 accumulation; a and b are bf16 (kF16 false) or f16 pairs.
template <bool kF16>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kF16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as a 16-bit pair, the lower index in the low half.
template <bool kF16>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  if constexpr (kF16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// x rounded to the 16-bit type and back: what pack() keeps of it.
template <bool kF16>
__device__ __forceinline__ float round16(float x) {
  if constexpr (kF16) return __half2float(__float2half_rn(x));
  else return __bfloat162float(__float2bfloat16_rn(x));
}

// atomicInc at GPU scope with acquire and release semantics: the calling thread's earlier
// writes (and, after a block barrier, the block's) are visible to whoever reads the new
// value, and the writes of whoever made the old value are visible after it.
__device__ __forceinline__ unsigned atom_inc_acq_rel(unsigned* addr, unsigned wrap) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(addr), "r"(wrap) : "memory");
  return old;
}

// 2^x on the MUFU in one instruction (exp2f adds range fix-ups for subnormal results):
// ~2^-22 relative error, subnormal results flushed to zero, exp2(-inf) = 0. The softmax
// loops' exponential.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// tanh(x) in one MUFU instruction (~2^-11 relative error): softcap for 16-bit scores.
__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Byte offset of (row, 16-byte chunk) in a [rows, D] tile: chunks XOR-swizzled by row % 8,
// so the 8 rows of an ldmatrix 8x8 (and a cp.async row) hit 8 different bank groups.
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row * D + ((chunk ^ (row & 7)) * 8)) * 2u;
}

// An ldmatrix lane reads rows whose row % 8 is lane % 8 and chunks 2 kk + c (c in {0, 1}), so
// its swizzled chunk is (2 kk) ^ y with y = c ^ (lane % 8): four per-lane byte offsets
// (kk % 4) plus a constant 128 bytes per 4 kk. Keeps the address registers to a handful.
struct LaneChunks {
  uint32_t off[4];
  __device__ __forceinline__ explicit LaneChunks(int y) {
#pragma unroll
    for (int j = 0; j < 4; ++j) off[j] = static_cast<uint32_t>(((2 * j) ^ y) * 16);
  }
  __device__ __forceinline__ uint32_t at(int kk) const { return off[kk & 3] + (kk >> 2) * 128; }
};

}  // namespace kvf::exec::cuda::detail::ptx
