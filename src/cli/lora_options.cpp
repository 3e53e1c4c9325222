#include "cli/lora_options.h"

#include <cmath>
#include <memory>
#include <set>

namespace kvf::cli {

void add_lora_option(CLI::App& cmd, LoraOptions& o) {
  cmd.add_option("--lora", o.specs,
                 "a LoRA adapter NAME=PATH[:SCALE] (repeatable): a PEFT directory (adapter_config.json + "
                 "adapter_model.safetensors) or a GGUF LoRA file, applied at run time (not merged) with its "
                 "scale lora_alpha/r times SCALE (default 1)")
      ->type_name("NAME=PATH[:SCALE]");
}

Result<LoraSpec> parse_lora_spec(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalid_input("--lora ", text, ": expected NAME=PATH[:SCALE]");
  }
  LoraSpec s{text.substr(0, eq), text.substr(eq + 1), 1.0};
  const size_t colon = s.path.rfind(':');
  if (colon != std::string::npos) {
    const std::string tail = s.path.substr(colon + 1);
    char* end = nullptr;
    const double v = std::strtod(tail.c_str(), &end);
    if (!tail.empty() && end == tail.c_str() + tail.size()) {
      if (!std::isfinite(v)) return invalid_input("--lora ", text, ": SCALE must be a finite number");
      s.scale = v;
      s.path.resize(colon);
    }
  }
  if (s.path.empty()) return invalid_input("--lora ", text, ": no PATH");
  return s;
}

Result<models::LoraSet> load_adapters(const LoraOptions& o, const models::Model& m) {
  std::vector<std::shared_ptr<const models::LoraAdapter>> adapters;
  std::set<std::string> names;
  uint64_t serial = 0;
  for (const std::string& text : o.specs) {
    Result<LoraSpec> s = parse_lora_spec(text);
    if (!s) return s.take_error();
    if (!names.insert(s->name).second) return invalid_input("--lora: the name ", s->name, " is given twice");
    Result<models::LoraAdapter> a = models::load_lora(s->path, m, s->name);
    if (!a) return a.take_error().context("--lora ", s->name);
    a->scale *= s->scale;
    a->content_hash = models::lora_content_hash(*a);
    a->serial = ++serial;
    adapters.push_back(std::make_shared<const models::LoraAdapter>(std::move(*a)));
  }
  return models::LoraSet(std::move(adapters));
}

}  // namespace kvf::cli
