// LoRA adapters in a traced step. With StepSpec::lora set, the step declares the kAdapter
// slot (each token's adapter: 0 for the base model, i for the set's adapter i) and every
// projection that some adapter of the set targets becomes
//   y = W x (+ bias) + s[id] * B[id] (A[id] x)
// over per-weight stacks of the adapters' factors (entry 0 zero; ranks padded with zero
// rows), gathered per token: one step serves rows of different adapters and rows of none,
// and a row of none adds an exact 0. Stated in primitives (gather, batched matmul), so the
// oracle defines it.
#pragma once

#include <memory>
#include <vector>

#include "models/family.h"
#include "models/lora.h"

namespace kvf::models {

struct LoraSet {
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;  // adapter id i + 1 is adapters[i]
};

// The id of the adapter named `name` in `set` (1-based), kInvalidInput naming the loaded ones
// when there is none.
Result<int32_t> lora_id(const LoraSet* set, const std::string& name);

// Declares t.adapter (i32 [rows * n], each word in [0, adapters]) and hooks t.b's linears.
void trace_lora(StepTrace& t, const LoraSet& set, int64_t tokens);

}  // namespace kvf::models
