// cpu_relax: one round of a spin-wait loop. On x86 a `pause`, which tells the core (and its
// sibling hyperthread) that this thread only waits; elsewhere a yield.
#pragma once

#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kvf {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace kvf
