#include "exec/state.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "plan/buffer_plan.h"
#include "plan/kv_shards.h"

namespace kvf::exec {

HostBuffer::HostBuffer(int64_t bytes) : bytes_(bytes) {
  Result<void*> p = host_memory().allocate_zeroed(bytes);
  if (!p) std::abort();  // out of memory: nothing sensible to return
  data_.reset(*p);
}

void HostBuffer::Free::operator()(void* p) const { host_memory().release(p); }

namespace {

// 64-byte aligned blocks, each preceded by a 64-byte header holding its size, so that what
// is in use is known for the --max-memory budget.
class HostMemory final : public Memory {
 public:
  std::string name() const override { return "host"; }
  Result<void*> allocate_zeroed(int64_t bytes) override {
    const auto size = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    auto* block = static_cast<unsigned char*>(std::aligned_alloc(64, size + kHeader));
    if (block == nullptr) return capacity("host memory: ", bytes, " bytes could not be allocated");
    std::memcpy(block, &size, sizeof size);
    std::memset(block + kHeader, 0, size);
    in_use_ += static_cast<int64_t>(size);
    return block + kHeader;
  }
  void release(void* p) noexcept override {
    if (p == nullptr) return;
    unsigned char* block = static_cast<unsigned char*>(p) - kHeader;
    size_t size = 0;
    std::memcpy(&size, block, sizeof size);
    in_use_ -= static_cast<int64_t>(size);
    std::free(block);
  }
  int64_t available_bytes() const override {
    const int64_t system = mem_available();
    if (limit_ < 0) return system;
    const int64_t budget = std::max<int64_t>(0, limit_ - reserved_ - in_use_.load());
    return system < 0 ? budget : std::min(system, budget);
  }
  void limit(int64_t limit, int64_t reserved) {
    limit_ = limit;
    reserved_ = reserved;
  }

 private:
  static constexpr size_t kHeader = 64;

  static int64_t mem_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit) {
      if (key == "MemAvailable:") return kib * 1024;
    }
    return -1;
  }

  std::atomic<int64_t> in_use_{0};
  int64_t limit_ = -1, reserved_ = 0;
};

HostMemory& the_host_memory() {
  static HostMemory m;
  return m;
}

}  // namespace

Memory& host_memory() { return the_host_memory(); }

void limit_host_memory(int64_t limit, int64_t reserved) { the_host_memory().limit(limit, reserved); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) memory_->release(data_);
    memory_ = std::exchange(o.memory_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Buffer::~Buffer() {
  if (data_ != nullptr) memory_->release(data_);
}

namespace {

// Elements the store holds of state v: a pool's share under `share`, else all of it.
int64_t held_elements(const ir::Value& v, const PoolShare& share) {
  const Shape& s = v.type.shape;
  if (!plan::is_pool(v, share.pool_slots)) return numel(s);
  return numel(s) / s[0] * share.rows_held;
}

}  // namespace

Status StateStore::allocate(const ir::Graph& g, PoolShare share) {
  int64_t wanted = 0;  // what the new buffers take, checked against the memory before any is made
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kState || buffers_.count(v.name) != 0) continue;
    wanted += held_elements(v, share) * std::max<int64_t>(plan::element_bytes(v.type.dtype), 1);
  }
  const int64_t available = memory_->available_bytes();
  if (available >= 0 && wanted > available) {
    return capacity("state of ", g.name, ": ", wanted, " bytes (KV caches or pools) do not fit the ", available,
                    " bytes ", memory_->name(), " memory has available; lower --ctx or the pool size");
  }
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kState) continue;
    auto it = buffers_.find(v.name);
    if (it != buffers_.end()) {
      if (it->second.type != v.type) {
        return invalid_input("state ", v.name, " is ", ir::type_str(it->second.type), ", graph ", g.name, " wants ",
                             ir::type_str(v.type));
      }
      continue;
    }
    const int64_t eb = plan::element_bytes(v.type.dtype);
    if (eb == 0) return unsupported("state ", v.name, ": no executor storage for ", ir::type_str(v.type));
    const int64_t bytes = held_elements(v, share) * eb;
    Result<void*> p = memory_->allocate_zeroed(bytes);
    if (!p) return p.take_error().context("state ", v.name);
    buffers_.emplace(v.name, StateBuffer{v.type, Buffer(memory_, *p, bytes)});
  }
  return {};
}

StateBuffer* StateStore::find(const std::string& name) {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? nullptr : &it->second;
}

int64_t StateStore::bytes() const {
  int64_t n = 0;
  for (const auto& [name, s] : buffers_) n += s.buf.bytes();
  return n;
}

int64_t StateStore::elements() const {
  int64_t n = 0;
  for (const auto& [name, s] : buffers_) n += numel(s.type.shape);
  return n;
}

}  // namespace kvf::exec
