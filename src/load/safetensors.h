// Hugging Face safetensors reader: one model.safetensors, or a sharded set named by
// model.safetensors.index.json. Tensors are borrowed from the memory map; every malformed
// header is a typed error naming the file and the field or offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace kvf::load {

// One tensor as its header describes it.
struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype;   // as written: "F32", "BF16", "I64", ...
  Shape shape;         // row-major; [] is a scalar
  uint64_t begin = 0;  // byte range, relative to the shard's data section
  uint64_t end = 0;
  size_t shard = 0;    // index into SafetensorsSet::shards()
};

// One file of the set: where it came from, its data section and its __metadata__.
struct SafetensorsShard {
  std::string path;
  std::span<const uint8_t> data;             // the bytes after the header
  std::shared_ptr<const void> keepalive;     // the mapping (or caller buffer) owning data
  std::map<std::string, std::string> metadata;
};

class SafetensorsSet {
 public:
  // Every tensor name, sorted.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafetensorsTensorInfo* find(const std::string& name) const;
  const std::vector<SafetensorsShard>& shards() const { return shards_; }
  // The path given to open_safetensors (or the name given to parse_safetensors_bytes).
  const std::string& path() const { return path_; }

  // The tensor's bytes: F32, F16, BF16, I32 and I8 are borrowed from the mapping (copied only
  // when misaligned for their element type); other dtypes are kUnsupported.
  Result<HostTensor> tensor(const std::string& name) const;

 private:
  friend class SafetensorsBuilder;
  std::string path_;
  std::vector<SafetensorsShard> shards_;
  std::map<std::string, SafetensorsTensorInfo> index_;
  std::vector<std::string> names_;
};

// Bytes per element of a safetensors dtype string; 0 when the dtype is unknown.
int64_t safetensors_dtype_size(const std::string& dtype);

// Opens a model.safetensors file, a model.safetensors.index.json, or a directory holding
// either (the index wins when both are present).
Result<SafetensorsSet> open_safetensors(const std::string& path_or_dir);

// Parses one whole safetensors file held in memory; `keepalive` owns the bytes (may be null
// when the caller keeps them alive for the set's lifetime, as tests and fuzzers do).
Result<SafetensorsSet> parse_safetensors_bytes(std::span<const uint8_t> bytes, const std::string& name,
                                               std::shared_ptr<const void> keepalive = nullptr);

}  // namespace kvf::load
