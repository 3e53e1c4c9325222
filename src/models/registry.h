// The model families kvforge runs, in one table: for each, the names checkpoints give it
// (config.json model_type, GGUF general.architecture) and the functions that read its
// config, map its tensor names and trace its steps. Adding a family is adding a row here
// (docs/architecture.md, "Add a model family"); nothing else names one.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/family.h"
#include "models/model_config.h"
#include "models/weights.h"

namespace kvf::load {
class HfConfig;
class GgufFile;
}  // namespace kvf::load

namespace kvf::models {

struct FamilyNames;

using TraceFnPtr = Result<ir::Graph> (*)(const ModelConfig&, const Weights&, const StepSpec&);
using HfConfigReader = Status (*)(const load::HfConfig&, ModelConfig&);
struct GgufCodec;

struct Family {
  std::string_view arch;                     // ModelConfig::arch, the key every other layer uses
  std::vector<std::string_view> hf_types;    // config.json model_type values it reads
  std::string_view gguf_arch;                // GGUF general.architecture; empty: no GGUF support yet
  TraceFnPtr trace;
  HfConfigReader hf_config;                  // config.json -> ModelConfig
  const FamilyNames* hf_names;               // HF tensor names -> kvforge's
  const GgufCodec* gguf = nullptr;           // GGUF metadata and layouts, both ways (gguf_codec.h)
  bool learned_positions = false;            // an absolute position table (no position past context)
  // Its tracer runs a tensor-parallel rank (models/tensor_parallel.h): the all-reduces after
  // the split projections, the masked embedding and the placed classifier rows.
  bool tensor_parallel = false;
};

std::span<const Family> families();
// The family by ModelConfig::arch, by config.json model_type or by GGUF architecture (the
// first row of that name: mixtral's GGUF is llama's); null when none has that name.
const Family* family_by_arch(std::string_view arch);
const Family* family_by_hf_type(std::string_view model_type);
const Family* family_by_gguf_arch(std::string_view gguf_arch);
// "llama, mistral, ..." for messages: the registry's arch names, model_types or GGUF names.
enum class FamilyKey { kArch, kHfType, kGguf };
std::string known_families(FamilyKey key);

}  // namespace kvf::models
