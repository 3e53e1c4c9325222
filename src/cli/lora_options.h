// --lora NAME=PATH[:SCALE] (repeatable): the LoRA adapters a command loads for its model,
// numbered in flag order (adapter 1 is the first --lora; 0 is the base model).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "models/lora_trace.h"

namespace kvf::cli {

struct LoraOptions {
  std::vector<std::string> specs;  // as given
};

void add_lora_option(CLI::App& cmd, LoraOptions& o);

struct LoraSpec {
  std::string name, path;
  double scale = 1.0;  // multiplies the adapter's own scale (lora_alpha / r)
};
// "NAME=PATH" or "NAME=PATH:SCALE"; a name is what requests select the adapter by.
Result<LoraSpec> parse_lora_spec(const std::string& text);

// Every adapter of the flags loaded for `m`, each with its own load serial.
Result<models::LoraSet> load_adapters(const LoraOptions& o, const models::Model& m);

}  // namespace kvf::cli
