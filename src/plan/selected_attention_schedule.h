// Selected attention's schedule on the CPU (exec/cpu/selection.h): each query row runs alone
// over the keys it sees, listed in key order and read as pool rows, streaming when they fit
// one piece of kCpuAttentionPiece keys and split-KV over the pieces otherwise (the same bits
// either way). The list's length is known only when the row runs, so the scratch is sized for
// every key of the row: the layout below, in floats, which the kernel follows.
#pragma once

#include <cstdint>

#include "plan/attention_schedule.h"

namespace kvf::plan {

struct SelectedAttentionScratch {
  int64_t partials = 0;  // split-KV partials of one query row: Hq heads x pieces x (dv + 2)
  int64_t keys = 0;      // i32: the listed keys' positions, then their pool rows
  int64_t mask = 0;      // the listed keys' mask words, mask_heads rows
  int64_t q = 0, out = 0;  // one query row's q [Hq, dq] and output [Hq, dv]
  int64_t total = 0;
};

inline SelectedAttentionScratch selected_attention_scratch(int64_t hq, int64_t lk, int64_t dq, int64_t dv,
                                                           int64_t mask_heads) {
  SelectedAttentionScratch s;
  s.keys = hq * cpu_attention_pieces(lk) * (dv + 2);
  s.mask = s.keys + 2 * lk;
  s.q = s.mask + mask_heads * lk;
  s.out = s.q + hq * dq;
  s.total = s.out + hq * dv;
  return s;
}

// The GPU's (exec/cuda/step/selection.cu): for each of the B Lq query rows, its visible keys'
// pool rows [Lk] (i32), their count, and their mask words [mask_heads, Lk].
inline int64_t gpu_selected_attention_scratch_bytes(int64_t batch, int64_t lq, int64_t lk, int64_t mask_heads) {
  const int64_t rows = batch * lq;
  return 4 * (rows * lk + rows + rows * mask_heads * lk);
}

}  // namespace kvf::plan
