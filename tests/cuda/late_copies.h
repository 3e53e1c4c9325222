// A kernel in front of a programmatic dependent, for the tests of what such a dependent
// may read before its wait: it lets the next kernel launch at once, spins, and only then
// writes, so a read that should have waited finds the old bytes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace kvf::testing {

// `rows` rows of row_bytes, src_stride / dst_stride bytes apart.
struct LateCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t row_bytes = 0, dst_stride = 0, src_stride = 0;
  int rows = 0;
};
inline constexpr int kLateCopies = 4;
struct LateCopies {
  LateCopy copy[kLateCopies];
  int n = 0;
  long long spin_cycles = 0;  // SM clock cycles before the first write
};

cudaError_t launch_late_copies(const LateCopies& c, cudaStream_t s);

}  // namespace kvf::testing
