#include "exec/cuda/step/device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kvf::exec::cuda::step {
namespace {

Error cuda_error(const char* what, cudaError_t e) {
  return internal_error("cuda: ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

}  // namespace

Result<int> Device::count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return unsupported("--device cuda: no usable CUDA driver or device (", cudaGetErrorString(e), ")");
  }
  return count;
}

Result<std::unique_ptr<Device>> Device::open(int index) {
  Result<int> count = Device::count();
  if (!count) return count.take_error();
  if (*count == 0) return unsupported("--device cuda: no CUDA device is visible");
  if (index < 0 || index >= *count) return unsupported("--device cuda: no GPU ", index, " (", *count, " visible)");
  cudaDeviceProp prop{};
  if (cudaError_t pe = cudaGetDeviceProperties(&prop, index); pe != cudaSuccess) return cuda_error("device properties", pe);
  if (prop.major < 9) {
    return unsupported("--device cuda: ", prop.name, " is compute capability ", prop.major, ".", prop.minor,
                       "; the kernels are built for sm_90 (Hopper)");
  }
  std::unique_ptr<Device> d(new Device());
  d->index_ = index;
  if (Status s = d->make_current(); !s) return s.take_error();
  cudaStream_t s = nullptr;
  if (cudaError_t se = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); se != cudaSuccess) return cuda_error("stream", se);
  d->stream_ = s;
  void* f = nullptr;
  if (cudaError_t fe = cudaMalloc(&f, sizeof(FaultRecord)); fe != cudaSuccess) return cuda_error("fault record", fe);
  d->fault_ = static_cast<FaultRecord*>(f);
  // cuBLASLt for the linears of many rows; without it they stay on the SIMT kernels.
  if (void* h = tensor_cores_open(); h != nullptr) {
    constexpr int64_t kWorkspace = 32 << 20;  // what cuBLASLt's Hopper kernels ask for at most
    void* ws = nullptr;
    if (cudaError_t we = cudaMalloc(&ws, kWorkspace); we != cudaSuccess) {
      tensor_cores_close(h);
      return cuda_error("cublasLt workspace", we);
    }
    d->tensor_cores_ = {.handle = h, .workspace = ws, .workspace_bytes = kWorkspace};
  }
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  plan::DeviceCaps& caps = d->caps_;
  caps.target = plan::Target::kCuda;
  caps.name = str_cat("cuda: ", prop.name, ", ", prop.multiProcessorCount, " SMs, ", gib, " GiB");
  caps.cores = prop.multiProcessorCount;
  caps.l1d_bytes = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  caps.l2_bytes = prop.l2CacheSize;
  caps.l3_bytes = 0;
  caps.simd_bytes = 128;  // a warp's 32 lanes of f32
  caps.lane_state_bytes = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  caps.max_scratch_bytes = static_cast<int64_t>(prop.totalGlobalMem) / 4;
  caps.has_f16_kv = true;
  caps.half_compute = true;
  Status c = d->clear_fault();
  if (!c) return c.take_error();
  const char* profile = std::getenv("KVF_CUDA_PROFILE");
  if (profile != nullptr && std::string(profile) == "1") {
    for (void*& ev : d->profile_events_) {
      cudaEvent_t event = nullptr;
      if (cudaError_t ee = cudaEventCreate(&event); ee != cudaSuccess) return cuda_error("profile event", ee);
      ev = event;
    }
  }
  return d;
}

Status Device::make_current() const {
  if (cudaError_t e = cudaSetDevice(index_); e != cudaSuccess) return cuda_error("set device", e);
  return {};
}

Device::~Device() {
  if (!profile_.empty()) {
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(profile_.begin(), profile_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& r : rows) total += r.second.first;
    std::fprintf(stderr, "kvforge: cuda profile, %.3f ms in eqns\n", total);
    for (const auto& [name, t] : rows) {
      std::fprintf(stderr, "  %-28s %10.3f ms %6.1f%% %8lld launches %8.2f us each\n", name.c_str(), t.first,
                   100.0 * t.first / total, static_cast<long long>(t.second), 1000.0 * t.first / static_cast<double>(t.second));
    }
  }
  for (void* ev : profile_events_) {
    if (ev != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  }
  weights_.clear();
  tensor_cores_close(tensor_cores_.handle);
  if (tensor_cores_.workspace != nullptr) cudaFree(tensor_cores_.workspace);
  if (fault_ != nullptr) cudaFree(fault_);
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

std::string Device::name() const { return caps_.name; }

Result<void*> Device::allocate_zeroed(int64_t bytes) {
  void* p = nullptr;
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  const cudaError_t e = cudaMalloc(&p, size);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky: clear it for the next call
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return capacity(caps_.name, ": ", bytes, " bytes do not fit (", free, " of ", total, " bytes free)");
  }
  // On the step stream: a plain cudaMemset runs on the legacy stream, which does not order
  // against a non-blocking one, and could land after the first copy into the buffer.
  if (cudaError_t me = cudaMemsetAsync(p, 0, size, static_cast<cudaStream_t>(stream_)); me != cudaSuccess) {
    cudaFree(p);
    return cuda_error("memset", me);
  }
  return p;
}

void Device::release(void* p) noexcept { cudaFree(p); }

int64_t Device::available_bytes() const {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<int64_t>(free);
}

Result<const void*> Device::upload(const HostTensor& t) {
  const WeightKey key{t.raw(), t.dtype(), t.shape(), t.strides()};
  auto it = weights_.find(key);
  if (it != weights_.end()) return static_cast<const void*>(it->second.device.data());
  HostTensor c = t;
  if (!c.is_contiguous()) {
    Result<HostTensor> r = t.contiguous();
    if (!r) return r.take_error();
    c = std::move(*r);
  }
  const int64_t bytes = c.nbytes();
  Result<void*> p = allocate_zeroed(bytes);
  if (!p) return p.take_error();
  Buffer b(this, *p, bytes);
  Status s = copy_to_device(*p, c.raw(), bytes);
  if (!s) return s.take_error();
  return static_cast<const void*>(weights_.emplace(key, Upload{t, std::move(b)}).first->second.device.data());
}

Status Device::copy_to_device(void* dst, const void* src, int64_t bytes) {
  if (bytes == 0) return {};
  const cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                                        static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("copy to device", e);
  return {};
}

Status Device::copy_to_host(void* dst, const void* src, int64_t bytes) {
  if (bytes == 0) return {};
  const cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                                        static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("copy to host", e);
  return {};
}

Status Device::copy_on_device(void* dst, const void* src, int64_t bytes) {
  if (bytes == 0 || dst == src) return {};
  const cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                        static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("copy on device", e);
  return {};
}

Status Device::synchronize(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error(what, e);
  return {};
}

Status Device::clear_fault() {
  const cudaError_t e = cudaMemsetAsync(fault_, 0, sizeof(FaultRecord), static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("clear fault", e);
  return {};
}

Status Device::begin_capture() {
  const cudaError_t e = cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_), cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return cuda_error("begin capture", e);
  return {};
}

Result<void*> Device::end_capture() {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream_), &graph);
  if (e != cudaSuccess) return cuda_error("end capture", e);
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) return cuda_error("instantiate graph", e);
  return static_cast<void*>(exec);
}

Status Device::launch_graph(void* graph) {
  const cudaError_t e = cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("graph launch", e);
  return {};
}

void Device::destroy_graph(void* graph) noexcept {
  if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

Status Device::time_begin() {
  const cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(profile_events_[0]), static_cast<cudaStream_t>(stream_));
  if (e != cudaSuccess) return cuda_error("profile", e);
  return {};
}

Status Device::time_end(const std::string& kernel) {
  auto* stop = static_cast<cudaEvent_t>(profile_events_[1]);
  cudaError_t e = cudaEventRecord(stop, static_cast<cudaStream_t>(stream_));
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  float ms = 0;
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(profile_events_[0]), stop);
  if (e != cudaSuccess) return cuda_error("profile", e);
  auto& [total, launches] = profile_[kernel];
  total += ms;
  ++launches;
  return {};
}

Result<FaultRecord> Device::read_fault() {
  FaultRecord r;
  const cudaError_t e = cudaMemcpy(&r, fault_, sizeof r, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_error("read fault", e);
  return r;
}

}  // namespace kvf::exec::cuda::step
