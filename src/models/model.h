// Model: a config, its weights, its tokenizer (when the checkpoint has one) and the family
// tracer, opened from whatever --model names: a GGUF file, a llama2.c .bin, a safetensors
// directory (planned) or synthetic:<family>-<size>.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "load/tokenizer.h"
#include "models/family.h"

namespace kvf::models {

using TraceFn = std::function<Result<ir::Graph>(const ModelConfig&, const Weights&, const StepSpec&)>;

struct Model {
  ModelConfig config;
  Weights weights;
  std::unique_ptr<load::Tokenizer> tokenizer;  // null when none was found
  TraceFn trace;
  std::string source;  // what was opened, for messages

  Result<ir::Graph> trace_step(const StepSpec& step) const { return trace(config, weights, step); }
};

struct OpenOptions {
  std::string tokenizer_path;  // llama2.c: tokenizer.bin when it is not next to the model
  bool check_finite = true;    // scan float weights for NaN/inf at load
  bool with_tokenizer = true;  // false: skip the tokenizer (ids in, ids out)
  // Hears the bytes of the finiteness scan, done and in all (a terminal's progress line).
  std::function<void(int64_t done, int64_t total)> progress;
};

Result<Model> open_model(const std::string& spec, const OpenOptions& opts = {});

// The family tracer for a GGUF general.architecture / HF model_type, or kUnsupported
// naming the architecture.
Result<TraceFn> family_tracer(const std::string& arch);

}  // namespace kvf::models
