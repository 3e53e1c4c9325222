// Placeholder until the byte-level BPE tokenizer lands.
#include "load/tokenizer.h"

namespace kvf::load {
Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab) { return unsupported("BPE tokenizer not built yet"); }
}  // namespace kvf::load
