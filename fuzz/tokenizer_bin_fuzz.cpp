// libFuzzer target: llama2.c tokenizer.bin. The first 4 input bytes are the vocab size (int32,
// as a checkpoint header would give it), the rest is the file for parse_llama2c_vocab; a vocab
// that parses is built into a Tokenizer and encodes/decodes a short text (fuzz_util.h).
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_util.h"
#include "load/vocab_readers.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  int32_t vocab_size = 0;
  std::memcpy(&vocab_size, data, 4);
  Result<load::Vocab> v = load::parse_llama2c_vocab(std::span<const uint8_t>(data + 4, size - 4), vocab_size, "fuzz.bin");
  if (!fuzz::ok_or_typed(v)) return 0;
  if (v->size() != vocab_size) fuzz::die("parsed " + std::to_string(v->size()) + " tokens, asked for " + std::to_string(vocab_size));
  fuzz::exercise_vocab(std::move(*v));
  return 0;
}
