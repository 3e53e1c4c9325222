// Shape and dtype inference for every primitive, in one place. The builder, the verifier
// and (later) the compiler's rewrites all type equations through this function.
#pragma once

#include <span>

#include "ir/graph.h"

namespace kvf::ir {

// The result type of op over operands of the given types, or a typed kInvalidInput error
// naming the op and the mismatch. Axes in params must already be non-negative.
Result<TensorType> infer(OpKind op, const Params& params, std::span<const TensorType> in);

// The typing rules of the fused ops (infer_fused.cpp); infer() forwards to it.
Result<TensorType> infer_fused(OpKind op, const Params& params, std::span<const TensorType> in);

// numpy broadcasting of two shapes.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace kvf::ir
