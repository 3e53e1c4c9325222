// llama2.c checkpoints (the legacy format: a 7 x int32 header, then f32 weights in
// llama2.c's order; a negative vocab size means the classifier is stored separately).
// Weights are borrowed from the memory map under GGUF's llama tensor names.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "load/mapped_file.h"

namespace kvf::load {

struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // as stored: negative when the classifier is not shared
  int32_t seq_len = 0;
  bool shared_classifier() const { return vocab_size > 0; }
  int32_t vocab() const { return vocab_size < 0 ? -vocab_size : vocab_size; }
};

struct Llama2cCheckpoint {
  Llama2cHeader header;
  // token_embd.weight, blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,
  // ffn_down,ffn_up}.weight, output_norm.weight, and output.weight when unshared.
  std::map<std::string, HostTensor> tensors;
};

Result<Llama2cCheckpoint> read_llama2c(const std::string& path);
// Parses bytes kept alive by `keepalive` (the mapping, or a test buffer).
Result<Llama2cCheckpoint> parse_llama2c(std::span<const uint8_t> bytes, const std::string& name,
                                        std::shared_ptr<const void> keepalive);

}  // namespace kvf::load
