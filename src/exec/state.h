// Buffers that live across steps (KV caches), owned by the driver and shared by the plans
// of every step length: a prefill plan and a decode plan write the same caches.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "ir/graph.h"

namespace kvf::exec {

// A 64-byte aligned, zero-initialized byte buffer.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(int64_t bytes);
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  int64_t bytes() const { return bytes_; }

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> data_;
  int64_t bytes_ = 0;
};

struct StateBuffer {
  ir::TensorType type;
  HostBuffer buf;
};

class StateStore {
 public:
  // A zeroed buffer for every state value g declares that the store lacks; refuses a name
  // the store holds with another type.
  Status allocate(const ir::Graph& g);
  StateBuffer* find(const std::string& name);
  int64_t bytes() const;
  int64_t elements() const;
  void clear() { buffers_.clear(); }

 private:
  std::map<std::string, StateBuffer> buffers_;
};

}  // namespace kvf::exec
