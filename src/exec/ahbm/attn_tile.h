// The attn_tile composite of ADR §3, laid out once for every case: DMA K → MM q·Kᵀ →
// [VEC mask] → VEC online softmax (carried m, l) → DMA V (issued early) → MM P·V → VEC O
// update (carried O). The kernels decide the tile, the rows, the mask and the extra stages
// (a Q or state load in front, a push or a store at the tail); this only lays stages out.
#pragma once

#include <optional>
#include <string>

#include "exec/ahbm/composite.h"
#include "exec/ahbm/flash_math.h"

namespace kvf::ahbm {

// Bytes one stored element takes in the PE's memory and on the DMA.
int64_t element_bytes(DType storage);

struct TileWork {
  std::string name;
  int stream = 0;
  int64_t rows = 0, tile = 0, head_dim = 0;
  float scale = 1;
  DType storage = DType::kBF16;       // the DMA moves its bytes; MM inputs are rounded to it
  const float* q = nullptr;           // [rows, head_dim] in SRAM
  const float* k = nullptr;           // the tile's first K row in the PE's memory
  const float* v = nullptr;           // and its first V row
  int64_t valid = 0;                  // tile rows holding tokens; the DMA zero-fills the rest
  int64_t mask_rows = 0;              // 0: the null mask; else the kernel's mask in b.mask [mask_rows, tile]
  FlashState* state = nullptr;        // the running (m, l, O) this composite updates
  int64_t row0 = 0;                   // from this row of *state
  bool values = true;                 // false: timing only, no stage computes values
  bool carry_qk = false;              // mm_qk waits for the stream's previous mm_qk (Q loaded once per block)
};

// The optional stages in front: q_load (mm_qk waits for it) and state_load (the softmax
// waits for it). The update is the last stage of the result; tail stages go after it.
Composite attn_tile(const TileWork& w, TileBuffers& b, std::optional<Stage> q_load = {},
                    std::optional<Stage> state_load = {});

}  // namespace kvf::ahbm
