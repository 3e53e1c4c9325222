// libFuzzer target: the input as a PEFT adapter_config.json beside the real factors of
// tests/fixtures/llama_lora's adapter a1, loaded for that fixture's base (models::load_lora);
// an adapter that loads is served: a two-token prefill with it on the CPU, whose logits must
// be finite at the scales trained adapters have (|s| <= 1e4: a larger lora_alpha may
// overflow the term, as weights that large would). A refusal must be a typed kvf::Error.
// Run from the repository root.
#include <cmath>
#include <filesystem>
#include <memory>

#include "fuzz_util.h"
#include "llm/generator.h"
#include "model_fuzz.h"
#include "models/lora.h"
#include "models/lora_trace.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string fixture = "tests/fixtures/llama_lora";
  static const models::Model base = [] {
    Result<models::Model> r = models::open_model(fixture, {.tokenizer_path = "", .check_finite = true, .with_tokenizer = false});
    if (!r) fuzz::die("run from the repository root: " + r.error().to_string());
    return std::move(*r);
  }();
  static const fs::path dir = [] {
    const fs::path d = fuzz::scratch_path("lora");
    fs::create_directories(d);
    fs::copy_file(fixture + "/adapters/a1/adapter_model.safetensors", d / "adapter_model.safetensors",
                  fs::copy_options::overwrite_existing);
    return d;
  }();
  fuzz::write_file(dir / "adapter_config.json", data, size);
  Result<models::LoraAdapter> a = models::load_lora(dir.string(), base, "fuzz");
  if (!fuzz::ok_or_typed(a)) return 0;
  if (a->rank <= 0 || !std::isfinite(a->scale)) fuzz::die("an adapter of rank <= 0 or a non-finite scale was accepted");
  const bool trained_scale = std::abs(a->scale) <= 1e4;
  const models::LoraSet set{{std::make_shared<const models::LoraAdapter>(std::move(*a))}};
  llm::Generator gen(base, 4, {.threads = 1, .last_logits = true, .lora = &set, .adapter = 1});
  Result<std::vector<float>> logits = gen.step({1, 2});
  if (!fuzz::ok_or_typed(logits) || !trained_scale) return 0;
  for (float v : *logits) {
    if (!std::isfinite(v)) fuzz::die("an accepted adapter gave a non-finite logit");
  }
  return 0;
}
