// Selected attention's kernels on the CPU.
// block_topk: each query row's topk best complete blocks (blocks of `ratio` positions whose
// last position is at or before the row's pos), ties to the lower block; a NaN score is kept
// and is never ahead of another (ops::block_topk's rank counts, eval/).
// selected_attention: the fused Attention with mask + ops::selected_mask(selected, pos, Lk,
// ratio): each query row lists the keys it sees (t <= pos, t < len, t's block selected or
// unfinished) and runs the attention kernel over them alone, read as pool rows (paged keys
// through the read map, dense keys of one key head as rows b Lk + t), its mask words
// gathered beside them; split-KV over the pieces of the list (plan/selected_attention_schedule.h).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "exec/cpu/attention.h"

namespace kvf::exec::cpu {

struct BlockTopKArgs {
  const float* scores = nullptr;  // [rows, blocks]
  const int32_t* pos = nullptr;   // [rows]
  int64_t rows = 0, blocks = 0, topk = 1, ratio = 1;
  uint8_t* out = nullptr;         // pred [rows, blocks]
};
void block_topk(ThreadPool& pool, const BlockTopKArgs& a);

struct SelectedAttentionArgs {
  AttentionArgs attn;             // the eqn's attention (dense keys need hkv == 1)
  const uint8_t* selected = nullptr;  // pred [B, Lq, blocks]
  const int32_t* pos = nullptr;       // [B * Lq]
  int64_t blocks = 0, ratio = 1;
};
// scratch: plan::selected_attention_scratch(hq, lk, dk + ds, dv, mask_heads).total floats.
void selected_attention(ThreadPool& pool, const SelectedAttentionArgs& a, float* scratch);

}  // namespace kvf::exec::cpu
