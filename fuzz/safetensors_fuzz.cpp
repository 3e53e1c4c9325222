// libFuzzer target: safetensors bytes through parse_safetensors_bytes, then tensor() and an f32
// read of every listed tensor. Any failure must be a typed kvf::Error; a borrowed tensor must lie
// inside the input (misaligned ones are copied), and the name list must match find().
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_util.h"
#include "load/safetensors.h"

using namespace kvf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Result<load::SafetensorsSet> set = load::parse_safetensors_bytes(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  if (!fuzz::ok_or_typed(set)) return 0;
  if (set->shards().size() != 1) fuzz::die("one file gave " + std::to_string(set->shards().size()) + " shards");
  if (!std::is_sorted(set->names().begin(), set->names().end())) fuzz::die("names() is not sorted");
  for (const std::string& name : set->names()) {
    const load::SafetensorsTensorInfo* info = set->find(name);
    if (info == nullptr || info->name != name) fuzz::die("find() misses listed tensor " + name);
    (void)load::safetensors_dtype_size(info->dtype);
    Result<HostTensor> t = set->tensor(name);
    if (!fuzz::ok_or_typed(t)) continue;
    if (t->shape() != info->shape) fuzz::die("tensor " + name + ": shape differs from its header");
    const auto* p = static_cast<const uint8_t*>(t->raw());
    if (!t->owning() && t->nbytes() > 0 && (p < data || p + t->nbytes() > data + size)) {
      fuzz::die("tensor " + name + " is borrowed from outside the input");
    }
    (void)fuzz::ok_or_typed(t->to_f32());
  }
  (void)fuzz::ok_or_typed(set->tensor("no.such.tensor"));
  return 0;
}
