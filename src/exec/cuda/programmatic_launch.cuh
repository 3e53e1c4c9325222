// Programmatic dependent launch (PDL), shared by the attention kernels and the step kernels:
// a kernel launched as a programmatic dependent of the kernel in front on its stream may
// start before that kernel ends, and waits for it on the device instead.
#pragma once

#include <cuda_runtime.h>

namespace kvf::exec::cuda {

// A launch of kernel(args...) on s; pdl: as a programmatic dependent of the kernel in front.
// Such a kernel must call await_kernel_in_front() before it reads anything the kernel in
// front writes, or writes anything it reads.
template <class... Params, class... Args>
cudaError_t launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
                                Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

// Waits until the kernel in front has finished and its writes are visible, then lets the
// kernel after this one launch (its blocks wait in turn). Without PDL both return at once.
__device__ inline void await_kernel_in_front() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
}

}  // namespace kvf::exec::cuda
