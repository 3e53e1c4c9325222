// The primitives on the CPU, for whatever compile/ leaves unfused: contiguous buffers,
// f32 / i32 / pred arithmetic, numpy broadcasting. None allocates; each is one pass.
// Data-dependent failures (an index outside a table, a write past a cache) are typed errors.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "exec/tensor_ref.h"

namespace kvf::exec::cpu {

// Runs primitive eqn e (not a fused op, not a reshape) from `in` into `out`.
// A DynamicUpdateSlice/ScatterUpdate whose out aliases in[0] updates in place.
Status run_primitive(const ir::Eqn& e, std::span<const Ref> in, const Ref& out, ThreadPool& pool);

// Whether run_primitive handles e over these operand types (checked once, at plan time).
Status check_primitive(const ir::Eqn& e, std::span<const ir::TensorType> in, const ir::TensorType& out);

}  // namespace kvf::exec::cpu
