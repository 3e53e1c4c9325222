// libFuzzer target: the input as Hugging Face tokenizer.json text through parse_hf_tokenizer;
// a vocab that parses is built into a Tokenizer and encodes/decodes a short text (fuzz_util.h).
// Any failure must be a typed kvf::Error (the JSON library is used without exceptions).
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "load/vocab_readers.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<load::Vocab> v = load::parse_hf_tokenizer(text, "fuzz.json");
  if (!fuzz::ok_or_typed(v)) return 0;
  fuzz::exercise_vocab(std::move(*v));
  return 0;
}
