// libFuzzer target: a Hugging Face checkpoint directory opened as a model and stepped on the
// CPU when it opens (model_fuzz.h). The input is a little-endian u32 n, then n bytes of
// config.json, then model.safetensors; tokenizer files are not part of it.
#include <cstring>

#include "model_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n;
  std::memcpy(&n, data, 4);
  if (n > size - 4) return 0;
  const std::filesystem::path dir = kvf::fuzz::scratch_path("hf");
  std::filesystem::create_directories(dir);
  kvf::fuzz::write_file(dir / "config.json", data + 4, n);
  kvf::fuzz::write_file(dir / "model.safetensors", data + 4 + n, size - 4 - n);
  kvf::fuzz::open_and_step(dir.string());
  return 0;
}
