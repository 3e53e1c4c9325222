#include "exec/cuda/step/pinned_memory.h"

#include <cuda_runtime.h>

#include <cstring>

namespace kvf::exec::cuda::step {
namespace {

class PinnedMemory final : public Memory {
 public:
  std::string name() const override { return "pinned host memory"; }
  Result<void*> allocate_zeroed(int64_t bytes) override {
    void* p = nullptr;
    const size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
    if (const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocDefault); e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it for the next call
      return capacity("pinned host memory: ", bytes, " bytes: ", cudaGetErrorString(e));
    }
    std::memset(p, 0, size);
    return p;
  }
  void release(void* p) noexcept override {
    if (p != nullptr) cudaFreeHost(p);
  }
  int64_t available_bytes() const override { return host_memory().available_bytes(); }
};

}  // namespace

Memory& pinned_memory() {
  static PinnedMemory m;
  return m;
}

}  // namespace kvf::exec::cuda::step
