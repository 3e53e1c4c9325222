// For targets without k-quant kernels (the GPU): every k-quant constant of a traced graph
// becomes an f16 constant of its dequantized values, before the passes run. The weights are
// dequantized once per model, not per step shape: `cache` (kept by the caller as long as the
// model) maps each quantized tensor's bytes to its f16 copy, so every step's graph shares one
// copy, which a device then uploads once.
#pragma once

#include <map>

#include "core/tensor.h"
#include "ir/graph.h"

namespace kvf::compile {

using WidenedConstants = std::map<const void*, HostTensor>;

Status widen_kquant_constants(ir::Graph& g, WidenedConstants& cache);

}  // namespace kvf::compile
