// What the host code asks of the current CUDA device, read once per device: its SM count
// and whether it runs the sm_90a (Hopper) kernels. Plain C++, no CUDA headers.
#pragma once

#include <cstdint>

namespace kvf::exec::cuda::detail {

// Whether a device pointer is aligned to `bytes` (the kernels copy 16-byte vectors).
inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Multiprocessors of the current device; 0 when there is none or it cannot be read.
int sm_count();

// Whether the current device is compute capability 9.0, which the *_sm90a.cu kernels need.
bool is_sm90();

}  // namespace kvf::exec::cuda::detail
