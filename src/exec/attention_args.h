// One attention eqn's operands as every backend's kernel reads them: the CPU kernels, the
// CUDA step's attention rows, the AHBM and context-parallel targets. The request's shape and
// score transform with the pointers of the eqn's inputs; plain data that nvcc compiles too.
// attention_operands.h fills it from an eqn's bound inputs.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kvf::exec {

struct AttentionArgs {
  int64_t batch = 1, hq = 1, hkv = 1, lq = 1, lk = 1;
  int64_t dk = 0;  // per-head key width (without the shared part)
  int64_t ds = 0;  // shared key width (MLA split key); 0 when there is none
  int64_t dv = 0;
  const float* q = nullptr;     // f32 [B, Hq, Lq, dk + ds]
  DType kv_dtype = DType::kF32; // F32 or F16: the dtype of k, k_shared and v
  const void* k = nullptr;      // [B, Hkv, Lk, dk], or paged the pool [pool_rows, Hkv, dk]
  const void* k_shared = nullptr;  // [B, 1, Lk, ds], or paged the pool [pool_rows, 1, ds]; null: none
  const void* v = nullptr;      // [B, Hkv, Lk, dv], or paged the pool [pool_rows, Hkv, dv]
  // Paged keys: i32 [B, Lk], the pool row of every key, each in [0, pool_rows) (the kernel
  // does not check the words: the binders have, ir::check_slot). Null: dense keys.
  const int32_t* read = nullptr;
  int64_t pool_rows = 0;
  const float* mask = nullptr;  // additive f32 [mask_batch, mask_heads, Lq, Lk] or null
  int64_t mask_batch = 1;       // 1 or B
  int64_t mask_heads = 1;       // 1 or Hq (ALiBi)
  const int32_t* len = nullptr; // i32 [B] live lengths, or null; clamped into [0, Lk]
  float scale = 1.0f;
  float softcap = 0.0f;         // 0: none
  float* out = nullptr;         // f32 [B, Hq, Lq, dv]
};

}  // namespace kvf::exec
