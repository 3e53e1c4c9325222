// What an eqn's launch takes from its IR: element sizes, walks over broadcast and strided
// operands, the kernels' op codes and a rope's task. Host code shared by the step executor
// (executor.cpp) and the passes that merge its launches (launch_fusion.cpp).
#pragma once

#include <initializer_list>

#include "exec/cuda/step/kernels.h"
#include "ir/graph.h"

namespace kvf::exec::cuda::step {

// Bytes of one element of dt, at least 1.
int64_t elem_bytes(DType dt);
// Row-major strides of s into a walk's stride array.
void strides_into(const Shape& s, int64_t* st);
// The walk over `out` with numpy-broadcast strides for each operand shape.
Walk broadcast_walk(const Shape& out, std::initializer_list<const Shape*> ops);
// A copy walk over `shape`: source strides `src`, destination contiguous strides of `dst_shape`.
Walk copy_walk(const Shape& shape, const int64_t* src, const Shape& dst_shape);
UnaryOp unary_op(ir::OpKind op);
BinaryOp binary_op(ir::OpKind op, ir::CmpDir cmp);
GluAct glu_act(ir::GluAct a);
inline bool word(DType d) { return d == DType::kF32 || d == DType::kI32 || d == DType::kBool; }
inline bool half(DType d) { return d == DType::kF16 || d == DType::kBF16; }
// rope()'s arguments for a Rope eqn over x of `shape` (ir::rope_positions).
RopeTask rope_task(const void* x, const Shape& shape, int64_t numel, const void* cos, const void* sin,
                   const ir::RopeParams& p, void* out);

}  // namespace kvf::exec::cuda::step
