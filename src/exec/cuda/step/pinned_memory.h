// Page-locked host memory (cudaHostAlloc): what a step's outputs are copied back into. A copy
// into pageable memory goes through the driver's staging buffer at a fraction of the
// link's speed (a 64-row batch's logits are 8 MB a step). Plain C++: no CUDA headers.
#pragma once

#include "exec/state.h"

namespace kvf::exec::cuda::step {

Memory& pinned_memory();

}  // namespace kvf::exec::cuda::step
