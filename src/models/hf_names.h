// Hugging Face tensor names -> kvforge's (GGUF-style) names, one map per family layout, and
// the layout fixes some families need on the way (GPT-2's transposed Conv1D weights,
// BLOOM's per-head q/k/v interleave).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace kvf::models {

// How a tensor is stored in HF relative to kvforge's layout.
enum class Fix {
  kNone,
  kTranspose,  // GPT-2's Conv1D keeps [in, out]
  kBloomQkv,   // BLOOM interleaves q/k/v per head: [H, 3, hd, ...] -> [3, H, hd, ...]
  kSplitQkv,     // Phi-3's fused q/k/v rows -> attn_q, attn_k, attn_v (split_fused)
  kSplitGateUp,  // Phi-3's fused gate/up rows, gate first -> ffn_gate, ffn_up (split_fused)
};
inline bool splits(Fix f) { return f == Fix::kSplitQkv || f == Fix::kSplitGateUp; }

struct NameRule {
  const char* hf;     // suffix after the layer prefix, or a whole global name
  const char* ours;   // kvforge name (after "blk.N." for layer rules)
  Fix fix = Fix::kNone;
};

// Per-expert matrices "<prefix><e>.<gate|up|down>.weight" of a layer: blk.N.ffn_{gate,up,down}_exp.<e>.
struct ExpertNames {
  const char* prefix = nullptr;  // nullptr: the family has none
  const char* gate = nullptr;
  const char* up = nullptr;
  const char* down = nullptr;
};
inline constexpr ExpertNames kHfExperts{"mlp.experts.", "gate_proj", "up_proj", "down_proj"};

struct FamilyNames {
  const char* layer_prefix;  // "model.layers." or "transformer.h."
  std::vector<NameRule> layer;
  std::vector<NameRule> global;
  ExpertNames experts;
};

extern const FamilyNames kLlamaNames;     // llama, mistral, qwen2, qwen3
extern const FamilyNames kQwen3MoeNames;  // llama's, with the router and per-expert matrices
extern const FamilyNames kQwen2MoeNames;   // llama's, with the router, per-expert matrices and a gated shared expert
extern const FamilyNames kMixtralNames;   // llama's, with block_sparse_moe's router and w1/w3/w2 experts
extern const FamilyNames kPhi3Names;     // llama's, with fused qkv and gate_up projections
extern const FamilyNames kGemma2Names;
extern const FamilyNames kGemma3Names;  // gemma2's, with q/k norms
extern const FamilyNames kDeepseek2Names;
extern const FamilyNames kDeepseek3Names;  // deepseek2's, with the router's correction bias
extern const FamilyNames kDeepseek32Names; // deepseek3's, with the sparse-attention indexer
extern const FamilyNames kGpt2Names;
extern const FamilyNames kBloomNames;

// Buffers some checkpoints carry that are not weights (rotary tables, attention masks).
bool ignorable(const std::string& name);
// A fused matrix cut into kvforge's tensors by rows: `ours` is the name map_name gave it
// (blk.N.attn_qkv.weight or blk.N.ffn_gate_up.weight); q_rows and kv_rows size the q/k/v parts.
Result<std::vector<std::pair<std::string, HostTensor>>> split_fused(const std::string& ours, const HostTensor& t, Fix fix,
                                                                     int64_t q_rows, int64_t kv_rows);
// Maps one HF tensor name to kvforge's, or "" when the family does not use it.
std::pair<std::string, Fix> map_name(const FamilyNames& names, const std::string& hf);
// The tensor in kvforge's layout.
Result<HostTensor> apply_fix(HostTensor t, Fix fix, int64_t n_heads);

}  // namespace kvf::models
