// Writes an opened Model as a GGUF v3 file that llama.cpp loads: llama-family metadata,
// the tokenizer as tokenizer.ggml.*, and every weight in its stored type. This is
// `kvforge convert`'s back end; the model's source format does not matter.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "models/model.h"

namespace kvf::models {

struct ExportOptions {
  // The type of the matrices (f32, f16, q8_0, q4_k or q6_k); nullopt keeps every tensor's
  // stored type. As llama.cpp's converter does, 1-D tensors (norms, biases) stay f32, and a
  // matrix whose rows are not whole blocks of its type falls back: k-quants to q8_0 (rows of
  // whole 32-element blocks) or f16, q8_0 to f16. f16 rounds to nearest even; q8_0 takes
  // d = max|x|/127 per 32-element block, stores d as f16 and q = round(x/d); the k-quants
  // are fitted per sub-block (core/kquants.h).
  std::optional<DType> outtype;
  // With outtype q4_k, llama.cpp's Q4_K_M mix: output.weight, and attn_v and ffn_down in
  // the first and last eighth of the layers and every third layer between, as q6_k.
  bool q4_k_m = false;
  // Hears the bytes of the tensors converted so far and in all.
  std::function<void(int64_t done, int64_t total)> progress;
};

Status export_gguf(const Model& m, const std::string& path, const ExportOptions& opts = {});
// Whether export_gguf writes this model: kUnsupported naming what it lacks.
Status can_export_gguf(const ModelConfig& c);

}  // namespace kvf::models
