// Programmatic dependent launch (PDL), shared by the attention kernels and the step kernels:
// a kernel launched as a programmatic dependent of the kernel in front on its stream may
// start before that kernel ends, and waits for it on the device instead.
#pragma once

#include <cuda_runtime.h>

namespace kvf::exec::cuda {

// A launch of kernel(args...) on s in clusters of `cluster` blocks (1 x 1 x 1: none); pdl: as
// a programmatic dependent of the kernel in front. Such a kernel must call
// await_kernel_in_front() before it reads anything the kernel in front writes, or writes
// anything it reads.
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), dim3 grid, dim3 cluster, dim3 block, size_t smem, cudaStream_t s,
                             bool pdl, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

template <class... Params, class... Args>
cudaError_t launch_programmatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
                                Args... args) {
  return launch_clustered(kernel, grid, dim3(1, 1, 1), block, smem, s, pdl, args...);
}

// Waits until the kernel in front has finished and its writes are visible. Without PDL it
// returns at once.
__device__ inline void wait_for_kernel_in_front() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Lets the kernel after this one launch once every block of this one has said so (or ended);
// its blocks then wait in turn.
__device__ inline void let_next_kernel_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

// Both: the next kernel's blocks may take their places as soon as this one's are all running
// their own work.
__device__ inline void await_kernel_in_front() {
  wait_for_kernel_in_front();
  let_next_kernel_launch();
}

}  // namespace kvf::exec::cuda
