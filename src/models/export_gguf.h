// Writes an opened Model as a GGUF v3 file that llama.cpp loads: llama-family metadata,
// the tokenizer as tokenizer.ggml.*, and every weight in its stored type. This is
// `kvforge convert`'s back end; the model's source format does not matter.
#pragma once

#include <string>

#include "models/model.h"

namespace kvf::models {

Status export_gguf(const Model& m, const std::string& path);

}  // namespace kvf::models
