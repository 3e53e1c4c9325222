// Small Buffer builders shared by the oracle's primitive tests.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "eval/buffer.h"

namespace kvf::testing {

// A buffer of the given values; a count mismatch is a test failure, not a crash.
inline eval::Buffer make(DType dt, Shape s, std::vector<double> v) {
  Result<eval::Buffer> b = eval::Buffer::of(dt, std::move(s), std::move(v));
  if (!b) {
    ADD_FAILURE() << b.error().to_string();
    return eval::Buffer{};
  }
  return std::move(*b);
}
inline eval::Buffer f32(Shape s, std::vector<double> v) { return make(DType::kF32, std::move(s), std::move(v)); }
inline eval::Buffer i32(Shape s, std::vector<double> v) { return make(DType::kI32, std::move(s), std::move(v)); }

// x[i] = i + offset over shape s.
inline eval::Buffer ramp(Shape s, double offset = 0) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i) + offset;
  return f32(std::move(s), std::move(v));
}

}  // namespace kvf::testing
