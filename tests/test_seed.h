// The seed of a randomized test, shared by tests/testing.h and the standalone GPU tests
// (tests/cuda/gpu_testing.h, which link nothing else of tests/): fresh on every run, so a
// fast kernel must compute the same function on any input; KVF_TEST_SEED=N replays one run.
// A test that fails prints the seeds it drew, as the line to replay it with.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kvf::testing {

// Installed by the first test_seed() of a binary; prints a failed test's seeds at its end.
class SeedPrinter : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { seeds_.clear(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    for (uint64_t s : seeds_) {
      std::printf("[ SEED     ] KVF_TEST_SEED=%" PRIu64 " replays %s.%s\n", s, info.test_suite_name(), info.name());
    }
  }
  void add(uint64_t seed) { seeds_.push_back(seed); }

 private:
  std::vector<uint64_t> seeds_;
};

inline uint64_t test_seed() {
  static SeedPrinter* const printer = [] {
    auto* p = new SeedPrinter;  // the listener list owns it
    ::testing::UnitTest::GetInstance()->listeners().Append(p);
    return p;
  }();
  uint64_t seed;
  if (const char* s = std::getenv("KVF_TEST_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  printer->add(seed);
  return seed;
}

}  // namespace kvf::testing
