// Weights: a checkpoint's tensors under GGUF-style names ("blk.3.attn_q.weight"), borrowed
// or owned, with shape-checked lookup. Loaders fill it; tracers read it.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"

namespace kvf::models {

class Weights {
 public:
  explicit Weights(std::string source = "") : source_(std::move(source)) {}

  void add(std::string name, HostTensor t) { tensors_[std::move(name)] = std::move(t); }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor, which must exist with exactly this row-major shape.
  Result<HostTensor> get(const std::string& name, const Shape& shape) const;
  // Refuses NaN or infinite values in any float tensor (a corrupt file), naming it.
  // Every float and block-quantized weight is finite; `progress` (when set) hears the bytes
  // scanned so far and in all, as the scan goes.
  Status check_finite(const std::function<void(int64_t done, int64_t total)>& progress = {}) const;

  const std::string& source() const { return source_; }
  const std::map<std::string, HostTensor>& tensors() const { return tensors_; }
  int64_t parameter_count() const;

 private:
  std::string source_;
  std::map<std::string, HostTensor> tensors_;
};

}  // namespace kvf::models
