// Buffers that live across steps (KV caches), owned by the driver and shared by the plans
// of every step length: a prefill plan and a decode plan write the same caches.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

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

// Where a StateStore's buffers live: host memory (host_memory()), or a device's.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual std::string name() const = 0;
  // `bytes` of zeroed memory; a shortfall is a kCapacity error naming it.
  virtual Result<void*> allocate_zeroed(int64_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // Bytes an allocation can take now (host: the kernel's MemAvailable, or less under
  // limit_host_memory; a device: its free memory); -1 when unknown.
  virtual int64_t available_bytes() const = 0;
};

Memory& host_memory();  // 64-byte aligned host allocations

// --max-memory: what is allocated through host_memory() may take `limit` bytes less
// `reserved` (the model's weights, which are mapped, not allocated); its available_bytes()
// is the smaller of what is left of that and the kernel's MemAvailable. limit < 0: no limit.
void limit_host_memory(int64_t limit, int64_t reserved);

// Bytes owned through a Memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory* memory, void* data, int64_t bytes) : memory_(memory), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void* data() { return data_; }
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  Memory* memory_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

struct StateBuffer {
  ir::TensorType type;
  Buffer buf;
};

// A paged pool held in part (a context-parallel rank's share, plan::PoolShards): of every
// key or value pool (a cache state whose first dimension is `pool_slots`) the store holds
// `rows_held` rows. Zero pool_slots: states whole.
struct PoolShare {
  int64_t pool_slots = 0;
  int64_t rows_held = 0;
};

class StateStore {
 public:
  explicit StateStore(Memory& memory = host_memory()) : memory_(&memory) {}
  Memory& memory() const { return *memory_; }

  // A zeroed buffer for every state value g declares that the store lacks (a pool's share
  // only, under `share`); refuses a name the store holds with another type, and (kCapacity,
  // before allocating any) buffers whose total the memory does not have.
  Status allocate(const ir::Graph& g, PoolShare share = {});
  StateBuffer* find(const std::string& name);
  int64_t bytes() const;
  int64_t elements() const;
  void clear() { buffers_.clear(); }

 private:
  Memory* memory_;
  std::map<std::string, StateBuffer> buffers_;
};

}  // namespace kvf::exec
