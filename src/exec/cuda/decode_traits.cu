// The tile facts the host planner needs, read from the same templates the kernels use.
#include "exec/cuda/decode_attention.cuh"

namespace kvf::exec::cuda::detail {
namespace {

template <int D>
constexpr int lcm_keys() {
  constexpr int a = MmaDecode<D, false>::kKeysPerIter, b = MmaDecode<D, true>::kKeysPerIter;
  int x = a, y = b;
  while (y != 0) {
    const int t = x % y;
    x = y;
    y = t;
  }
  return a / x * b;
}

}  // namespace

DecodeTraits decode_traits(int dk, int dv, bool tensor_cores) {
  if (tensor_cores) {
    // Chunks are multiples of both layouts' keys per pass.
    if (dk == 64 && dv == 64) return {lcm_keys<64>(), MmaDecode<64, false>::kRows};
    if (dk == 128 && dv == 128) return {lcm_keys<128>(), MmaDecode<128, false>::kRows};
    return {0, 0};
  }
  if (dk == 64 && dv == 64) return {keys_per_iter<64, 64>(), Tile<64, 64>::kMaxRows};
  if (dk == 128 && dv == 128) return {keys_per_iter<128, 128>(), Tile<128, 128>::kMaxRows};
  if (dk == 256 && dv == 256) return {keys_per_iter<256, 256>(), Tile<256, 256>::kMaxRows};
  if (dk == 192 && dv == 128) return {keys_per_iter<192, 128>(), Tile<192, 128>::kMaxRows};
  return {0, 0};
}

}  // namespace kvf::exec::cuda::detail
