// Decode attention, dk = 192, dv = 128: one head-dim pair per file so nvcc runs in parallel.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_decode_d192_128(const DecodeParams& p, void* stream) { return launch_decode<192, 128>(p, stream); }

int blocks_per_sm_d192_128(int rows, bool paged, bool tensor_cores) {
  return occupancy<192, 128>(rows, paged, tensor_cores);
}

}  // namespace kvf::exec::cuda::detail
