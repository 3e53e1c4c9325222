// The boundary between the host API (attention.cpp, g++) and the decode kernels (*.cu, nvcc):
// raw parameters and one launcher per head-dim pair. Plain C++, no CUDA headers.
#pragma once

#include <cstdint>

namespace kvf::exec::cuda::detail {

// Everything a decode launch reads; pointers are device pointers.
struct DecodeParams {
  const float* q;          // [B, Hq, Lq, dk]
  const void* k;           // [B, Hkv, cap, dk] or pool [slots, Hkv, dk]
  const void* v;           // [B, Hkv, cap, dv] or pool [slots, Hkv, dv]
  const int32_t* map;      // [B, map_stride] or null (dense, in order)
  int map_positions;       // 1: map lists positions of the dense cache [B, Hkv, cap, d], not pool rows
  const int32_t* lens;     // [B]
  const float* alibi;      // [Hq] or null
  const float* mask;       // [B or 1, mask_stride] additive, Lq 1 (SIMT kernel), or null
  float* out;              // [B, Hq, Lq, dv]
  float* ml;               // [B, Hq, Lq, 2]: each row's softmax state (m, l) in log2 units, or null
  float* part_acc;         // [B*Hq*Lq, splits, dv] (splits > 1)
  float* part_ml;          // [B*Hq*Lq, splits, 2]  (splits > 1)
  unsigned* counters;      // [B, Hkv, row_blocks] split arrivals, 0 between decodes (splits > 1)
  int batch, hq, hkv, lq, n_rep, cap, map_stride;
  int splits, chunk, rows, row_blocks;
  int chunks_from_lens;    // 1: each row's chunk from its length (row_chunk); chunk is then the least
  int chunk_align;         // keys per pass of the kernel: what a row's chunk is rounded up to
  float scale, softcap;
  int window;
  int mask_stride;         // 0: one mask row for every batch row
  int kv_f16;              // 0: bf16, 1: f16
  int tensor_cores;        // 1: the mma.sync kernel (decode_mma.cuh), 0: the SIMT kernel
  int programmatic;        // 1: launched as a programmatic dependent (PDL) of the kernel in front
  // PDL only: the keys the kernel in front writes, where it writes nothing else this one
  // reads but q and every kernel before it has ended: a dense cache's from *written_from on
  // (device i32 [1]), or the pool rows written_slots[0..written_slot_count) (at most 64).
  // The tensor-core kernel then issues its first tiles of other keys before it waits. Both
  // null: nothing is read before the wait.
  const int32_t* written_from;
  const int32_t* written_slots;
  int written_slot_count;
};

// Keys one block visits per pass (threads / threads-per-key) times the unroll: chunks are
// multiples of this. Rows: the most query rows one block holds for this head-dim pair.
struct DecodeTraits {
  int keys_per_iter;
  int max_rows;
};
// {0, 0} when that kernel has no instantiation for (dk, dv).
DecodeTraits decode_traits(int dk, int dv, bool tensor_cores);

// merge_attention_partials' arguments (attention.h), checked there.
struct PartialsMergeParams {
  int parts, rows, dv;
  const float* o;    // [parts, rows, dv]
  const float* ml;   // [parts, rows, 2]
  float* out;        // [rows, dv]
  float* out_ml;     // [rows, 2] or null
  int64_t o_stride, ml_stride;  // floats from one part to the next (rows * dv, rows * 2 when packed)
};
// One warp a row (partials_merge.cu). Returns a cudaError_t.
int launch_merge_partials(const PartialsMergeParams& p, void* stream);

// Launch the decode (one split kernel). Returns a cudaError_t.
int launch_decode_d64(const DecodeParams& p, void* stream);
int launch_decode_d128(const DecodeParams& p, void* stream);
int launch_decode_d256(const DecodeParams& p, void* stream);
int launch_decode_d192_128(const DecodeParams& p, void* stream);

// Resident blocks per multiprocessor of the split kernel for `rows` query rows per block
// (0 when the device cannot say). Sets the kernel's shared-memory limit as a side effect.
int blocks_per_sm_d64(int rows, bool paged, bool tensor_cores);
int blocks_per_sm_d128(int rows, bool paged, bool tensor_cores);
int blocks_per_sm_d256(int rows, bool paged, bool tensor_cores);
int blocks_per_sm_d192_128(int rows, bool paged, bool tensor_cores);

}  // namespace kvf::exec::cuda::detail
