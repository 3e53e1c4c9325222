// The contract of a slot's values, checked by every binder (the oracle, each executor)
// before a step runs, so that a bad map is refused with nothing dispatched:
//  - a read map (kSlotMap) names only rows of its pool: 0 <= slot < pool_slots;
//  - a write map (kWriteMap) names rows of its pool or -1 (a padding token writes
//    nothing), and never the same row twice (two tokens cannot own one slot).
// The attention rewrite relies on the first rule to read the pools in place.
#pragma once

#include <cstdint>
#include <span>

#include "core/error.h"
#include "ir/graph.h"

namespace kvf::ir {

Status check_slot(const Value& slot, std::span<const int32_t> words);

}  // namespace kvf::ir
