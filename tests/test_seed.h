// The seed of a randomized test, shared by tests/testing.h and the standalone GPU tests
// (tests/cuda/gpu_testing.h, which link nothing else of tests/): fresh on every run, so a
// fast kernel must compute the same function on any input; KVF_TEST_SEED=N replays one run.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace kvf::testing {

inline uint64_t test_seed() {
  if (const char* s = std::getenv("KVF_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

}  // namespace kvf::testing
