// What every model family provides, and the pieces their tracers share. A family is a
// config reader, a weight-name map and a tracer over ops::; the registry (registry.cpp)
// maps GGUF general.architecture / HF model_type to one.
#pragma once

#include <string>

#include "ir/builder.h"
#include "ir/graph.h"
#include "models/model_config.h"
#include "models/weights.h"

namespace kvf::models {

// The shape of one traced step.
struct StepSpec {
  int64_t n_tokens = 1;   // new tokens this step (prefill: the prompt; decode: 1)
  int64_t capacity = 0;   // KV cache positions (cached steps)
  bool cached = true;     // false: a full forward over these tokens alone, no state
};

// A weight as an f32 value: the named constant, cast from f16/bf16/q8_0/q4_0 when stored so
// (executors fuse the cast into the consuming matmul). A missing or misshapen tensor is
// recorded as the builder's error.
ir::V weight(ir::Builder& b, const Weights& w, const std::string& name, const Shape& shape);

// [1, n, heads * hd] -> [1, heads, n, hd] and back.
ir::V split_heads(ir::V x, int64_t heads, int64_t head_dim);
ir::V merge_heads(ir::V x);

}  // namespace kvf::models
