// Buffer planning (DESIGN.md §3): every intermediate that needs storage gets an offset in one
// arena, colored by lifetime so values that never live together share bytes. Reshapes alias
// their operand; an in-place update of donated state aliases the state. Plan-local scratch
// (split-KV partials) lives exactly as long as its eqn, so layers share one slot.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace kvf::plan {

struct BufferPlan {
  // Per value: the value whose storage it uses (itself when it owns storage or is a leaf).
  std::vector<ir::ValueId> storage_of;
  // Per value: byte offset in the arena, or -1 (leaves, aliases, values nothing reads).
  std::vector<int64_t> offset;
  // Per eqn: byte offset of its plan-local scratch, or -1.
  std::vector<int64_t> scratch_offset;
  int64_t arena_bytes = 0;   // peak: what the arena must hold
  int64_t naive_bytes = 0;   // what one buffer per value would take, for the report
};

// Whether e's result is its operand's bytes read another way: a reshape, or a transpose
// that moves only size-1 axes (the row-major order of the elements is unchanged, as in
// [1, T=1, H, D] -> [1, H, 1, D]). Executors run nothing for it.
bool is_alias(const ir::Graph& g, const ir::Eqn& e);

// Bytes one element of dt takes in an executor buffer (pred: 1).
int64_t element_bytes(DType dt);

// scratch_bytes[e] is eqn e's plan-local scratch (0: none).
Result<BufferPlan> plan_buffers(const ir::Graph& g, const std::vector<int64_t>& scratch_bytes);

}  // namespace kvf::plan
