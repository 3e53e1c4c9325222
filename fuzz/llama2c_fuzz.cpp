// libFuzzer target: llama2.c legacy checkpoint bytes through parse_llama2c, then an f32 read of
// every borrowed weight. Any failure must be a typed kvf::Error; a success must account for
// every byte (embedding, 9 tensors per layer, output norm, optional classifier).
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_util.h"
#include "load/llama2c.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Result<load::Llama2cCheckpoint> ck = load::parse_llama2c(std::span<const uint8_t>(data, size), "fuzz.bin", nullptr);
  if (!fuzz::ok_or_typed(ck)) return 0;
  const load::Llama2cHeader& h = ck->header;
  const size_t want = 2 + 9 * static_cast<size_t>(h.n_layers) + (h.shared_classifier() ? 0 : 1);
  if (ck->tensors.size() != want) {
    fuzz::die("parsed " + std::to_string(ck->tensors.size()) + " tensors, expected " + std::to_string(want));
  }
  for (const auto& [name, t] : ck->tensors) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    if (p < data || p + t.nbytes() > data + size) fuzz::die("tensor " + name + " lies outside the input");
    (void)fuzz::ok_or_typed(t.to_f32());
  }
  return 0;
}
