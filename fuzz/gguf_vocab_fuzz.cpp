// libFuzzer target: GGUF bytes through parse_gguf_bytes and vocab_from_gguf (tokenizer.ggml.*
// metadata, SPM, byte-level BPE or WordPiece); a vocab that parses is built into a Tokenizer and
// encodes/decodes a short text (fuzz_util.h). Any failure must be a typed kvf::Error.
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "load/vocab_readers.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Result<load::GgufFile> f = load::parse_gguf_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!fuzz::ok_or_typed(f)) return 0;
  Result<load::Vocab> v = load::vocab_from_gguf(*f);
  if (!fuzz::ok_or_typed(v)) return 0;
  fuzz::exercise_vocab(std::move(*v));
  return 0;
}
