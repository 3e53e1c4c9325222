// Placeholder until this vocabulary reader lands.
#include "load/vocab_readers.h"

namespace kvf::load {
Result<Vocab> read_llama2c_vocab(const std::string& path, int32_t) { return unsupported(path, ": not built yet"); }
Result<Vocab> parse_llama2c_vocab(std::span<const uint8_t>, int32_t, const std::string& name) {
  return unsupported(name, ": not built yet");
}
}  // namespace kvf::load
