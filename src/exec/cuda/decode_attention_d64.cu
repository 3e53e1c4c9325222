// Decode attention, dk = 64, dv = 64: one head-dim pair per file so nvcc runs in parallel.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_decode_d64(const DecodeParams& p, void* stream) { return launch_decode<64, 64>(p, stream); }

int blocks_per_sm_d64(int rows, bool paged, bool tensor_cores) {
  return occupancy<64, 64>(rows, paged, tensor_cores);
}

}  // namespace kvf::exec::cuda::detail
