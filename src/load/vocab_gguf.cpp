// Placeholder until this vocabulary reader lands.
#include "load/vocab_readers.h"

namespace kvf::load {
Result<Vocab> vocab_from_gguf(const GgufFile& f) { return unsupported(f.path, ": not built yet"); }
}  // namespace kvf::load
