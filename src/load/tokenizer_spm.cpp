// Placeholder until the SentencePiece-style tokenizer lands.
#include "load/tokenizer.h"

namespace kvf::load {
Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(Vocab) { return unsupported("SPM tokenizer not built yet"); }
}  // namespace kvf::load
