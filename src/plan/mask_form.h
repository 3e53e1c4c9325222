// Masks that a backend may apply as a rule instead of reading them as values.
#pragma once

#include "ir/graph.h"

namespace kvf::plan {

// When `mask` is the causal mask of ir::ops::causal_mask over key positions 0..Lk-1 —
// [1, 1, Lq, Lk] = select(compare(iota_k, pos[i], le), 0, -inf): key t is visible to query
// row i exactly when t <= pos[i] — the i32 value that holds the Lq positions; else -1.
// Adding 0 to a visible score is exact, so a kernel that hides the keys t > pos[i] instead
// of adding the mask computes the same attention.
ir::ValueId causal_positions(const ir::Graph& g, ir::ValueId mask);

}  // namespace kvf::plan
