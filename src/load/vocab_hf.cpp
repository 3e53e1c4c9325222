// Placeholder until this vocabulary reader lands.
#include "load/vocab_readers.h"

namespace kvf::load {
Result<Vocab> read_hf_tokenizer(const std::string& path) { return unsupported(path, ": not built yet"); }
Result<Vocab> parse_hf_tokenizer(const std::string&, const std::string& name) { return unsupported(name, ": not built yet"); }
}  // namespace kvf::load
