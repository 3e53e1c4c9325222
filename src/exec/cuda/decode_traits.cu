// The tile facts the host planner needs, read from the same templates the kernels use.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {

DecodeTraits decode_traits(int dk, int dv) {
  if (dk == 64 && dv == 64) return {keys_per_iter<64, 64>(), Tile<64, 64>::kMaxRows};
  if (dk == 128 && dv == 128) return {keys_per_iter<128, 128>(), Tile<128, 128>::kMaxRows};
  if (dk == 256 && dv == 256) return {keys_per_iter<256, 256>(), Tile<256, 256>::kMaxRows};
  if (dk == 192 && dv == 128) return {keys_per_iter<192, 128>(), Tile<192, 128>::kMaxRows};
  return {0, 0};
}

int decode_smem_bytes(int dk, int dv, int rows) {
  if (dk == 64 && dv == 64) return smem_bytes<64, 64>(rows);
  if (dk == 128 && dv == 128) return smem_bytes<128, 128>(rows);
  if (dk == 256 && dv == 256) return smem_bytes<256, 256>(rows);
  if (dk == 192 && dv == 128) return smem_bytes<192, 128>(rows);
  return 0;
}

}  // namespace kvf::exec::cuda::detail
