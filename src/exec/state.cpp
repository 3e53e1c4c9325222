#include "exec/state.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "plan/buffer_plan.h"

namespace kvf::exec {

HostBuffer::HostBuffer(int64_t bytes) : bytes_(bytes) {
  const auto size = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) std::abort();  // out of memory: nothing sensible to return
  std::memset(p, 0, size);
  data_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

namespace {

class HostMemory final : public Memory {
 public:
  std::string name() const override { return "host"; }
  Result<void*> allocate_zeroed(int64_t bytes) override {
    const auto size = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) return capacity("host memory: ", bytes, " bytes could not be allocated");
    std::memset(p, 0, size);
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
};

}  // namespace

Memory& host_memory() {
  static HostMemory m;
  return m;
}

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

Status StateStore::allocate(const ir::Graph& g) {
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
    int64_t n = 1;
    for (int64_t d : v.type.shape) n *= d;
    Result<void*> p = memory_->allocate_zeroed(n * eb);
    if (!p) return p.take_error().context("state ", v.name);
    buffers_.emplace(v.name, StateBuffer{v.type, Buffer(memory_, *p, n * eb)});
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
  for (const auto& [name, s] : buffers_) {
    int64_t e = 1;
    for (int64_t d : s.type.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace kvf::exec
