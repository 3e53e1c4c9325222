#include "models/registry.h"

#include <algorithm>

#include "models/bloom.h"
#include "models/deepseek2.h"
#include "models/gemma2.h"
#include "models/gguf_codec.h"
#include "models/gpt2.h"
#include "models/hf_family_config.h"
#include "models/hf_names.h"
#include "models/llama.h"

namespace kvf::models {
namespace {

const std::vector<Family>& table() {
  static const std::vector<Family> rows = {
      {.arch = "llama", .hf_types = {"llama"}, .gguf_arch = "llama", .trace = trace_llama,
       .hf_config = llama_hf_config, .hf_names = &kLlamaNames, .gguf = &kLlamaGguf, .tensor_parallel = true},
      // llama.cpp writes mistral and mixtral as llama (with experts): read back as llama.
      {.arch = "mistral", .hf_types = {"mistral"}, .gguf_arch = "llama", .trace = trace_llama,
       .hf_config = llama_hf_config, .hf_names = &kLlamaNames, .gguf = &kLlamaGguf, .tensor_parallel = true},
      {.arch = "qwen2", .hf_types = {"qwen2"}, .gguf_arch = "qwen2", .trace = trace_llama,
       .hf_config = llama_hf_config, .hf_names = &kLlamaNames, .gguf = &kQwenGguf, .tensor_parallel = true},
      {.arch = "qwen3", .hf_types = {"qwen3"}, .gguf_arch = "qwen3", .trace = trace_llama,
       .hf_config = qwen3_hf_config, .hf_names = &kLlamaNames, .gguf = &kQwenGguf, .tensor_parallel = true},
      {.arch = "qwen3moe", .hf_types = {"qwen3_moe"}, .gguf_arch = "qwen3moe", .trace = trace_llama,
       .hf_config = qwen3_moe_hf_config, .hf_names = &kQwen3MoeNames, .gguf = &kQwen3MoeGguf},
      {.arch = "qwen2moe", .hf_types = {"qwen2_moe"}, .gguf_arch = "qwen2moe", .trace = trace_llama,
       .hf_config = qwen2_moe_hf_config, .hf_names = &kQwen2MoeNames, .gguf = &kQwen2MoeGguf},
      {.arch = "mixtral", .hf_types = {"mixtral"}, .gguf_arch = "llama", .trace = trace_llama,
       .hf_config = mixtral_hf_config, .hf_names = &kMixtralNames, .gguf = &kLlamaGguf},
      {.arch = "phi3", .hf_types = {"phi3"}, .gguf_arch = "phi3", .trace = trace_llama, .hf_config = llama_hf_config,
       .hf_names = &kPhi3Names, .gguf = &kPhi3Gguf},
      {.arch = "gemma2", .hf_types = {"gemma2"}, .gguf_arch = "gemma2", .trace = trace_gemma2,
       .hf_config = gemma2_hf_config, .hf_names = &kGemma2Names, .gguf = &kGemma2Gguf},
      {.arch = "gemma3", .hf_types = {"gemma3_text"}, .gguf_arch = "gemma3", .trace = trace_gemma2,
       .hf_config = gemma3_hf_config, .hf_names = &kGemma3Names, .gguf = &kGemma3Gguf},
      {.arch = "gpt2", .hf_types = {"gpt2"}, .gguf_arch = "gpt2", .trace = trace_gpt2, .hf_config = gpt2_hf_config,
       .hf_names = &kGpt2Names, .gguf = &kGpt2Gguf, .learned_positions = true},
      {.arch = "bloom", .hf_types = {"bloom"}, .gguf_arch = "bloom", .trace = trace_bloom, .hf_config = bloom_hf_config,
       .hf_names = &kBloomNames, .gguf = &kBloomGguf},
      {.arch = "deepseek2", .hf_types = {"deepseek_v2"}, .gguf_arch = "deepseek2", .trace = trace_deepseek2,
       .hf_config = deepseek2_hf_config, .hf_names = &kDeepseek2Names, .gguf = &kDeepseek2Gguf},
      // llama.cpp's deepseek2 holds V3 as well (its sigmoid routing is a key): read back as deepseek2.
      {.arch = "deepseek3", .hf_types = {"deepseek_v3"}, .gguf_arch = "deepseek2", .trace = trace_deepseek2,
       .hf_config = deepseek3_hf_config, .hf_names = &kDeepseek3Names, .gguf = &kDeepseek2Gguf},
      {.arch = "deepseek32", .hf_types = {"deepseek_v32"}, .gguf_arch = "deepseek32", .trace = trace_deepseek2,
       .hf_config = deepseek32_hf_config, .hf_names = &kDeepseek32Names, .gguf = &kDeepseek32Gguf},
  };
  return rows;
}

}  // namespace

std::span<const Family> families() { return table(); }

const Family* family_by_arch(std::string_view arch) {
  for (const Family& f : table()) {
    if (f.arch == arch) return &f;
  }
  return nullptr;
}

const Family* family_by_hf_type(std::string_view model_type) {
  for (const Family& f : table()) {
    for (std::string_view t : f.hf_types) {
      if (t == model_type) return &f;
    }
  }
  return nullptr;
}

const Family* family_by_gguf_arch(std::string_view gguf_arch) {
  if (gguf_arch.empty()) return nullptr;
  for (const Family& f : table()) {
    if (f.gguf_arch == gguf_arch) return &f;
  }
  return nullptr;
}

std::string known_families(FamilyKey key) {
  std::vector<std::string_view> seen;
  std::string out;
  auto add = [&](std::string_view name) {
    if (name.empty() || std::find(seen.begin(), seen.end(), name) != seen.end()) return;
    seen.push_back(name);
    if (!out.empty()) out += ", ";
    out += name;
  };
  for (const Family& f : table()) {
    switch (key) {
      case FamilyKey::kArch: add(f.arch); break;
      case FamilyKey::kGguf: add(f.gguf_arch); break;
      case FamilyKey::kHfType:
        for (std::string_view t : f.hf_types) add(t);
        break;
    }
  }
  return out;
}

}  // namespace kvf::models
