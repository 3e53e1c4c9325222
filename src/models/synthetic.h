// synthetic:<family>-<size>: a model with a published architecture's shapes and seeded
// random weights, built in memory. For benchmarks and demos where the numbers, not the
// words, matter; no tokenizer (use --ids, or give the GGUF one with
// `kvforge convert -m synthetic:... --vocab ggml-vocab-llama-spm.gguf`).
#pragma once

#include <string>
#include <vector>

#include "models/model.h"

namespace kvf::models {

// The specs `--model synthetic:...` accepts, e.g. "llama-110m", for --help.
std::vector<std::string> synthetic_specs();
// spec without the "synthetic:" prefix; seed fixes the weights.
Result<Model> open_synthetic(const std::string& spec, uint64_t seed = 42);

}  // namespace kvf::models
