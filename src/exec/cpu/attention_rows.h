// Private to the CPU attention kernel: the one task every instruction-set body implements.
// attention.cpp cuts the work into RowTasks and prepares their inputs; attention_avx512.cpp
// (and the portable loops in attention.cpp) run the online softmax of one task.
#pragma once

#include <cstdint>

#include "exec/cpu/attention.h"

namespace kvf::exec::cpu::attn {

inline constexpr int64_t kLanes = 16;       // f32 per AVX-512 register; widths pad to it
inline constexpr int64_t kKeyBlock = 32;    // keys per online-softmax step
inline constexpr int64_t kMaxRows = 64;     // query rows per task
inline constexpr int64_t kTileFloats = 8192;  // rows * padded width of the q and o tiles
// The keys of a block transposed, [padded dk + padded ds, kKeyBlock].
inline constexpr int64_t kPackFloats = (kAttentionMaxWidth + 2 * kLanes) * kKeyBlock;

constexpr int64_t pad_lanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// One task: `rows` query rows that share the kv head (b, g), against keys [t_begin, t_end).
// A body leaves the unnormalized online-softmax state of every row: o (sum of weight * v),
// m (running max score) and l (sum of weights), starting from the neutral (0, -inf, 0).
struct RowTask {
  int64_t rows = 0;
  int64_t dk = 0, ds = 0, dv = 0;
  bool f16 = false;                // k, ks, v hold f16 bits instead of f32
  const float* q = nullptr;        // [rows, q_stride]: q * scale / (softcap or 1), zero padded;
  int64_t q_stride = 0;            //   the key part at 0, the shared part at ks_offset
  int64_t ks_offset = 0;
  // Key t's K row is k + row(t) * k_stride and its V row v + row(t) * v_stride, with
  // row(t) = t for dense keys (k [Lk, dk] and v [Lk, dv] of kv head (b, g); the strides are
  // dk and dv) and row(t) = read[t] for paged keys (k and v point at head g of pool row 0;
  // the strides are Hkv * dk and Hkv * dv, so one 16-token block's keys are a stride apart
  // and the blocks lie anywhere in the pool).
  const void* k = nullptr;
  const void* ks = nullptr;        // [Lk, ds] of batch row b, or paged the pool [S, 1, ds] whose
                                   //   row(t) is key t's (stride ds either way); null: none
  const void* v = nullptr;
  const int32_t* read = nullptr;   // paged: [Lk] batch row b's pool rows; null: dense
  int64_t k_stride = 0, v_stride = 0;
  const float* const* mask = nullptr;  // [rows]: each row's additive mask at key 0; null: none
  float softcap = 0.0f;            // 0: none
  int64_t t_begin = 0, t_end = 0;
  float* o = nullptr;              // [rows, o_stride] out
  int64_t o_stride = 0;
  float* m = nullptr;              // [rows] out
  float* l = nullptr;              // [rows] out
  float* s = nullptr;              // [kMaxRows, kKeyBlock] scratch: scores, then weights
  float* kt = nullptr;             // [kPackFloats] scratch: a packed key block
};

void run_rows_avx512(const RowTask& t);

}  // namespace kvf::exec::cpu::attn
