// libFuzzer target: GGUF bytes through parse_gguf_bytes, then every typed metadata getter on
// every key and tensor() (with an f32 read of its elements) on every tensor. Any failure must
// be a typed kvf::Error; ASan/UBSan catch reads outside the input.
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_util.h"
#include "load/gguf.h"

using namespace kvf;

namespace {

void touch_getters(const load::GgufFile& f, const std::string& key) {
  (void)fuzz::ok_or_typed(f.get_string(key));
  (void)fuzz::ok_or_typed(f.get_int(key));
  (void)fuzz::ok_or_typed(f.get_float(key));
  (void)fuzz::ok_or_typed(f.get_bool(key));
  (void)fuzz::ok_or_typed(f.get_strings(key));
  (void)fuzz::ok_or_typed(f.get_numbers(key));
  (void)f.get_int_or(key, 7);
  (void)f.get_float_or(key, 0.5);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Result<load::GgufFile> f = load::parse_gguf_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!fuzz::ok_or_typed(f)) return 0;
  for (const auto& [key, value] : f->metadata) touch_getters(*f, key);
  touch_getters(*f, "no.such.key");
  for (const load::GgufTensorInfo& info : f->tensors) {
    if (f->find_tensor(info.name) != &info) fuzz::die("find_tensor does not find " + info.name);
    Result<HostTensor> t = f->tensor(info.name);
    if (!fuzz::ok_or_typed(t)) continue;
    if (t->shape() != info.shape()) fuzz::die("tensor " + info.name + ": shape differs from its info");
    (void)fuzz::ok_or_typed(t->to_f32());  // reads every element of the borrowed or dequantized data
  }
  (void)fuzz::ok_or_typed(f->tensor("no.such.tensor"));
  return 0;
}
