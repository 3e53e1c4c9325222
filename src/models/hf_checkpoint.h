// Hugging Face checkpoints: a directory with config.json and *.safetensors (one file or
// sharded with model.safetensors.index.json), plus tokenizer.json when present. Each family
// maps config.json to a ModelConfig and HF tensor names to kvforge's (GGUF-style) names.
#pragma once

#include <string>

#include "models/model.h"

namespace kvf::models {

Result<Model> open_hf(const std::string& dir, const OpenOptions& opts);

}  // namespace kvf::models
