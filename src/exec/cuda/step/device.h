// One GPU as the step executors see it: the stream every step runs on, the fault record the
// kernels write, the weights (uploaded once, shared by the executors of every step shape)
// and device memory for the KV state. Plain C++: no CUDA headers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/tensor.h"
#include "exec/cuda/step/kernels.h"
#include "exec/state.h"
#include "plan/device_caps.h"

namespace kvf::exec::cuda::step {

class Device final : public Memory {
 public:
  // GPU `index` (made the calling thread's current device), or a kUnsupported refusal
  // naming what is missing (no driver or device, no such index, a device older than sm_90).
  static Result<std::unique_ptr<Device>> open(int index = 0);
  // The GPUs visible; kUnsupported without a usable driver.
  static Result<int> count();
  int index() const { return index_; }
  // Makes this GPU the calling thread's current device: the CUDA runtime's is per thread, and
  // a rank's steps may run on another thread than the one that opened it.
  Status make_current() const;
  ~Device() override;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  std::string name() const override;  // "cuda: NVIDIA H200, 132 SMs, 139.8 GiB"
  Result<void*> allocate_zeroed(int64_t bytes) override;
  void release(void* p) noexcept override;
  int64_t available_bytes() const override;

  void* stream() const { return stream_; }
  // The cuBLASLt handle and its workspace (no scratch: each executor brings its own).
  TensorCores tensor_cores() const { return tensor_cores_; }
  FaultRecord* fault() const { return fault_; }
  const plan::DeviceCaps& caps() const { return caps_; }  // read from the device when it opened

  // The device copy of a constant (row-major, contiguous), uploaded on first use of that
  // view and kept for the device's life, with the host bytes it was made from: they cannot be
  // freed and their address reused by other bytes (a reloaded LoRA adapter's stacks) that
  // would then find this copy.
  Result<const void*> upload(const HostTensor& t);

  Status copy_to_device(void* dst, const void* src, int64_t bytes);
  Status copy_to_host(void* dst, const void* src, int64_t bytes);
  Status copy_on_device(void* dst, const void* src, int64_t bytes);
  // Waits for the stream; a CUDA error (a failed launch, a fault of the GPU) is kInternal.
  Status synchronize(const char* what);
  Status clear_fault();
  // Stream capture into a CUDA graph: what is enqueued between the two calls is recorded,
  // not run; the instantiated graph replays it with one launch.
  Status begin_capture();
  Result<void*> end_capture();  // a cudaGraphExec_t
  Status launch_graph(void* graph);
  static void destroy_graph(void* graph) noexcept;

  // KVF_CUDA_PROFILE=1: executors run their eqns one by one, each timed by events, and the
  // device prints the time per kernel when it closes (no graphs, a sync per eqn: for finding
  // where a step's time goes, not for measuring it).
  bool profiling() const { return profile_events_[0] != nullptr; }
  Status time_begin();
  Status time_end(const std::string& kernel);
  // The step's fault record after synchronize().
  Result<FaultRecord> read_fault();

 private:
  Device() = default;

  int index_ = 0;
  void* stream_ = nullptr;
  FaultRecord* fault_ = nullptr;
  TensorCores tensor_cores_;
  plan::DeviceCaps caps_;
  // A view is its bytes and its layout: a transposed view shares its data's address.
  using WeightKey = std::tuple<const void*, DType, Shape, Shape>;
  struct Upload {
    HostTensor host;  // holds the bytes at the key's address
    Buffer device;
  };
  std::map<WeightKey, Upload> weights_;
  void* profile_events_[2] = {nullptr, nullptr};
  std::map<std::string, std::pair<double, int64_t>> profile_;  // kernel -> (ms, launches)
};

}  // namespace kvf::exec::cuda::step
