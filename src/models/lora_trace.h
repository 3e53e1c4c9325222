// LoRA adapters in a traced step. With StepSpec::lora set, the step declares the kAdapter
// slot (each token's adapter: 0 for the base model, i for the set's adapter i) and every
// projection that some adapter of the set targets becomes
//   y = W x (+ bias) + s[id] * B[id] (A[id] x)
// over per-weight stacks of the adapters' factors (entry 0 zero; ranks padded with zero
// rows), gathered per token: one step serves rows of different adapters and rows of none,
// and a row of none adds an exact 0. Stated in primitives (gather, batched matmul), so the
// oracle defines it.
#pragma once

#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/family.h"
#include "models/lora.h"

namespace kvf::models {

// One base weight's factors of every adapter of a set, stacked (entry 0 zero, smaller ranks
// padded with zeros), with E = adapters + 1: a [E, rank * in] (each entry A [rank, in]) and b
// [E, rank * out] (each entry Bᵀ [rank, out]: a term's columns are rows of b, read
// contiguously by the kernels), both of lora_stack_type(); s f32 [E, 1].
struct LoraStack {
  int64_t rank = 0, in = 0, out = 0;
  HostTensor a, b, s;
};

// The type an adapter's factors are kept in beside a base weight of type `weight`: f16 beside
// f16 and block-quantized weights (the adapter rounded to the half type the model computes
// its weights in, as vLLM keeps adapters in the model's dtype and llama.cpp's converter writes
// them: decode reads the factors of every adapted projection, so they cost bytes like the
// weights do), f32 beside f32 and bf16 weights (exactly as loaded).
DType lora_stack_type(DType weight);

// The adapters a model serves; adapter id i + 1 is adapters()[i]. A weight's stack is built
// once per type, on first use, and shared by the steps of every shape (and their uploads).
class LoraSet {
 public:
  LoraSet() = default;
  LoraSet(std::vector<std::shared_ptr<const LoraAdapter>> adapters);  // implicit: LoraSet set{{a1, a2}}
  LoraSet(LoraSet&& o) noexcept;
  LoraSet& operator=(LoraSet&& o) noexcept;
  const std::vector<std::shared_ptr<const LoraAdapter>>& adapters() const { return adapters_; }
  bool empty() const { return adapters_.empty(); }
  // The stack of base weight `name` in `type` (f32 or f16), built on first use; null when no
  // adapter targets the weight, an error when its memory is refused. It lives as long as this set.
  Result<const LoraStack*> stack(const std::string& name, DType type) const;

 private:
  std::vector<std::shared_ptr<const LoraAdapter>> adapters_;
  std::map<std::string, LoraStack> shapes_;  // per targeted weight: rank, in and out
  mutable std::mutex mu_;
  mutable std::map<std::pair<std::string, DType>, LoraStack> stacks_;
};

// The id of the adapter named `name` in `set` (1-based), kInvalidInput naming the loaded ones
// when there is none.
Result<int32_t> lora_id(const LoraSet* set, const std::string& name);

// Declares t.adapter (i32 [rows * n], each word in [0, adapters]) and hooks t.b's linears.
void trace_lora(StepTrace& t, const LoraSet& set, int64_t tokens);

}  // namespace kvf::models
