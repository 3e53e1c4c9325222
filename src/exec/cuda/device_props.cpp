// Device properties, cached per device (querying them costs a driver call per launch).
#include "exec/cuda/device_props.h"

#include <cuda_runtime.h>

#include <mutex>

namespace kvf::exec::cuda::detail {
namespace {

struct Props {
  bool read = false;
  int sms = 0;
  int major = 0, minor = 0;
};

Props current() {
  static std::mutex mu;
  static Props cached[64];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return {};
  std::lock_guard<std::mutex> lock(mu);
  Props& p = cached[dev];
  if (!p.read) {
    if (cudaDeviceGetAttribute(&p.sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&p.major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&p.minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return {};
    p.read = true;
  }
  return p;
}

}  // namespace

int sm_count() { return current().sms; }

bool is_sm90() {
  const Props p = current();
  return p.major == 9 && p.minor == 0;
}

}  // namespace kvf::exec::cuda::detail
