// A read-only memory map of a whole file. Tensors borrowed from a checkpoint keep the
// mapping alive through a shared handle, so weights are never copied at load.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/error.h"

namespace kvf::load {

class MappedFile {
 public:
  // Maps `path` read-only; an empty file maps to an empty span.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace kvf::load
