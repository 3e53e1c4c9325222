// libFuzzer target: the input as a GGUF file opened as a model (models::open_model: every
// family's metadata and tensor names, shapes against the config, the tokenizer) and stepped
// on the CPU when it opens (model_fuzz.h).
#include "model_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path path = kvf::fuzz::scratch_path("model.gguf");
  kvf::fuzz::write_file(path, data, size);
  kvf::fuzz::open_and_step(path.string());
  return 0;
}
