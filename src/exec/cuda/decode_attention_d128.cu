// Decode attention, dk = 128, dv = 128: one head-dim pair per file so nvcc runs in parallel.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_decode_d128(const DecodeParams& p, void* stream) { return launch_decode<128, 128>(p, stream); }

int blocks_per_sm_d128(int rows, bool paged, bool tensor_cores) {
  return occupancy<128, 128>(rows, paged, tensor_cores);
}

}  // namespace kvf::exec::cuda::detail
