// LoRA adapters: for each projection an adapter targets, factors A [r, in] and B [out, r]
// and a scale s, so that the adapted projection is y = W x + s · B (A x). They are applied
// at run time, never merged into W, so one step can serve rows of the base model and rows
// of several adapters together (models/lora_trace.h states the step's graph).
// Read from PEFT's directory (adapter_config.json + adapter_model.safetensors) and from
// llama.cpp's GGUF LoRA files; either is checked against the model it is loaded for.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "models/model.h"

namespace kvf::models {

struct LoraFactors {
  HostTensor a;  // f32 [rank, in]
  HostTensor b;  // f32 [out, rank]
};

struct LoraAdapter {
  std::string name;    // what requests select it by
  std::string source;  // the path it was read from, for messages
  int64_t rank = 0;
  double scale = 1.0;  // lora_alpha / r, or lora_alpha / sqrt(r) under rsLoRA
  std::map<std::string, LoraFactors> targets;  // kvforge weight name ("blk.0.attn_q.weight") -> factors
  // A hash of the factors and the scale (not of the name or the path): two loads of the same
  // bytes have the same content hash. See lora_identity().
  uint64_t content_hash = 0;
  // The load's number, given by whoever loads adapters: each load (a reload of the same bytes
  // too) gets a new one, so K/V cached through an earlier load is never served to it.
  uint64_t serial = 0;
};

// Reads a PEFT LoRA directory (or its adapter_config.json) for `base`. Refused, with a typed
// error naming the key or tensor: another PEFT type, DoRA, biases, modules_to_save, per-module
// rank or alpha patterns, a target the family's names do not map, a fused projection the
// loader splits, and factors whose shapes do not fit the base weight.
Result<LoraAdapter> load_peft_lora(const std::string& path, const Model& base, std::string name);

// Reads a GGUF LoRA file as llama.cpp's convert_lora_to_gguf writes it (general.type
// "adapter", adapter.type "lora", adapter.lora.alpha; tensors "<weight>.lora_a" [r, in] and
// "<weight>.lora_b" [out, r] under kvforge's names), with the same checks.
Result<LoraAdapter> load_gguf_lora(const std::string& path, const Model& base, std::string name);

// "synthetic:r<RANK>": an adapter of that rank on every attention and MLP projection of
// `base` (q, k, v, output, gate, up, down), factors drawn from a seed fixed by `name` at the
// scale of trained ones, lora_alpha = 2 r. For benchmarks and tests that need an adapter of a
// shape.
Result<LoraAdapter> synthetic_lora(const std::string& spec, const Model& base, std::string name);

// A directory or adapter_config.json: PEFT; a .gguf file: GGUF; "synthetic:r<RANK>".
Result<LoraAdapter> load_lora(const std::string& path, const Model& base, std::string name);

// The content hash of an adapter's factors and scale (FNV-1a over their bytes, in name order).
uint64_t lora_content_hash(const LoraAdapter& a);

}  // namespace kvf::models
