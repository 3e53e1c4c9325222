// config.json -> ModelConfig, one reader per family (the registry names which reads which
// model_type). Each fills what its family's tracer reads and refuses what it does not
// compute (another activation, routed-expert layers) with a typed error naming the key.
#pragma once

#include "core/error.h"
#include "load/hf_config.h"
#include "models/model_config.h"

namespace kvf::models {

Status llama_hf_config(const load::HfConfig& hf, ModelConfig& c);  // llama, mistral, qwen2
Status qwen3_hf_config(const load::HfConfig& hf, ModelConfig& c);  // llama's, with q/k norms
Status qwen3_moe_hf_config(const load::HfConfig& hf, ModelConfig& c);  // qwen3's, with routed layers
Status qwen2_moe_hf_config(const load::HfConfig& hf, ModelConfig& c);  // qwen2's, routed, a gated shared expert
Status mixtral_hf_config(const load::HfConfig& hf, ModelConfig& c);    // mistral's, every layer routed
Status gemma3_hf_config(const load::HfConfig& hf, ModelConfig& c);  // gemma2's, q/k norms, a local rope base
Status gemma2_hf_config(const load::HfConfig& hf, ModelConfig& c);
Status deepseek3_hf_config(const load::HfConfig& hf, ModelConfig& c);  // deepseek2's, V3's routing
Status deepseek32_hf_config(const load::HfConfig& hf, ModelConfig& c); // deepseek3's, with the sparse-attention indexer
Status deepseek2_hf_config(const load::HfConfig& hf, ModelConfig& c);
Status gpt2_hf_config(const load::HfConfig& hf, ModelConfig& c);
Status bloom_hf_config(const load::HfConfig& hf, ModelConfig& c);

}  // namespace kvf::models
