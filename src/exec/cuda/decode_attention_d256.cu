// Decode attention, dk = 256, dv = 256: one head-dim pair per file so nvcc runs in parallel.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_decode_d256(const DecodeParams& p, void* stream) { return launch_decode<256, 256>(p, stream); }

int blocks_per_sm_d256(int rows, bool paged, bool tensor_cores) {
  return occupancy<256, 256>(rows, paged, tensor_cores);
}

}  // namespace kvf::exec::cuda::detail
