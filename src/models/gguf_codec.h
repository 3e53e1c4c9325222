// How each family's GGUF files (llama.cpp's architectures) differ from kvforge's model, both
// ways: the metadata keys, and the tensors GGUF keeps in another layout (llama's q/k rows in
// rope pairs, gemma's norms stored as 1 + w, phi3's fused gate/up). The registry gives each
// family one codec; model.cpp reads through it and export_gguf.cpp writes through it.
#pragma once

#include <string>

#include "core/error.h"
#include "models/model_config.h"
#include "models/weights.h"

namespace kvf::load {
class GgufFile;
class GgufWriter;
}  // namespace kvf::load

namespace kvf::models {

struct GgufCodec {
  // Metadata -> ModelConfig; `arch` is the file's general.architecture (the keys' prefix).
  Status (*read_config)(const load::GgufFile& f, const std::string& arch, ModelConfig& c);
  // The tensors as read (stacked experts already split) -> kvforge's layout; null: the same.
  Status (*to_model)(ModelConfig& c, Weights& w) = nullptr;
  // What the family's GGUF architecture cannot express, refused before anything is written;
  // null: the family is not written to GGUF.
  Status (*check_export)(const ModelConfig& c) = nullptr;
  // ModelConfig -> metadata under `arch`.
  void (*write_config)(const ModelConfig& c, const std::string& arch, load::GgufWriter& w) = nullptr;
  // kvforge's tensors -> the GGUF layout (names kvforge's, experts still one tensor each);
  // null: the same.
  Result<Weights> (*to_gguf)(const ModelConfig& c, const Weights& w) = nullptr;
  // A tensor whose rows are weight `name`'s output rows as this architecture's GGUF lays them
  // (a GGUF LoRA adapter's B factor) -> the rows of `c`'s weight; null: the same.
  Result<HostTensor> (*rows_to_model)(const ModelConfig& c, const std::string& name, const HostTensor& t) = nullptr;
  // The same from the rows as Hugging Face lays them (a PEFT adapter's B factor), for a model
  // read from this architecture's GGUF; null: the same.
  Result<HostTensor> (*hf_rows_to_model)(const ModelConfig& c, const std::string& name, const HostTensor& t) = nullptr;
};

// llama (and mistral, and mixtral: llama.cpp's llama with experts): q/k rows in rope pairs.
extern const GgufCodec kLlamaGguf;
// qwen2 and qwen3 (rotate-half rope, q/k/v biases or q/k norms as the tensors say).
extern const GgufCodec kQwenGguf;
extern const GgufCodec kQwen3MoeGguf;  // every layer routed, the top-k renormalized
extern const GgufCodec kQwen2MoeGguf;  // every layer routed, not renormalized; a gated shared expert
extern const GgufCodec kPhi3Gguf;      // one ffn_up of [gate; up] rows, q/k/v fused or not
extern const GgufCodec kGpt2Gguf;      // the position table's rows are context_length
extern const GgufCodec kBloomGguf;     // ALiBi: no context of its own
extern const GgufCodec kGemma2Gguf;    // norms stored as 1 + w; scale by rule; softcaps; sliding period
extern const GgufCodec kGemma3Gguf;    // gemma2's, with q/k norms and the sliding layers' rope base
extern const GgufCodec kDeepseek2Gguf; // MLA's latent up-projection one tensor or split per head
extern const GgufCodec kDeepseek32Gguf; // deepseek2's, with the sparse-attention indexer's keys

}  // namespace kvf::models
