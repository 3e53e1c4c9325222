// TMA tensor maps of 16-bit row-major tensors, encoded on the host by the driver's
// cuTensorMapEncodeTiled (found once through the runtime: no -lcuda). The kernels that take
// them (*_sm90a.cu) read 128-byte-swizzled boxes of 64 columns, the layout wgmma_ptx.cuh's
// descriptors describe.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace kvf::exec::cuda::detail {

// A map of a `rank`-dimensional (2 or 3) f16 or bf16 tensor at `base`: dims and box sizes
// innermost first, strides (bytes, multiples of 16) of every dim past the first. Boxes are
// 128-byte swizzled; reads outside the tensor land as zeros. False when the driver has no
// encoder or refuses the map.
bool encode_tensor_map(CUtensorMap* map, const void* base, int rank, const uint64_t* dims, const uint64_t* strides,
                       const uint32_t* box, bool f16);

}  // namespace kvf::exec::cuda::detail
