// GGUF's tensor names where they differ from kvforge's: a layer's experts of one kind are one
// stacked [E, rows, cols] tensor in GGUF (`blk.N.ffn_gate_exps.weight`), one tensor per expert
// here (`blk.N.ffn_gate_exp.<e>.weight`, models/moe.h). Reading splits them into views of the
// stacked bytes; writing stacks them again.
#pragma once

#include <string>
#include <span>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/weights.h"

namespace kvf::models {

// Adds a tensor read from a GGUF file to w under kvforge's name(s).
Status add_gguf_tensor(Weights& w, const std::string& name, const HostTensor& t);

// One tensor of a GGUF file to write: its name there and the tensors of w it holds (one, or
// a layer's experts of one kind in expert order, to be stacked).
struct GgufTensorSource {
  std::string name;
  std::vector<std::pair<std::string, const HostTensor*>> parts;  // kvforge's name and tensor
};
// w's tensors as GGUF names them, in name order; stacked experts must be numbered 0..E-1
// and agree in dtype and shape.
Result<std::vector<GgufTensorSource>> gguf_sources(const Weights& w);
// parts (equal dtype and shape, contiguous) stacked along a new axis 0, in a fresh tensor.
Result<HostTensor> stack(std::span<const HostTensor> parts);

}  // namespace kvf::models
