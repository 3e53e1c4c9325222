// GGUF metadata -> ModelConfig, one reader per family layout (the registry names which
// reads which general.architecture). Keys are "<architecture>.<key>", as llama.cpp writes.
#pragma once

#include <string>

#include "core/error.h"
#include "load/gguf.h"
#include "models/model_config.h"

namespace kvf::models {

// llama and mistral: llama.cpp's converter permutes their q/k rows into adjacent pairs.
Status llama_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c);
// qwen2 and qwen3: HF's rotate-half kept (llama.cpp runs them in NEOX mode).
Status qwen_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c);
// qwen3moe: qwen3's, with expert_count, expert_used_count and expert_feed_forward_length; every
// layer routed, the top-k weights renormalized (as llama.cpp runs it).
Status qwen3moe_gguf_config(const load::GgufFile& f, const std::string& arch, ModelConfig& c);

}  // namespace kvf::models
