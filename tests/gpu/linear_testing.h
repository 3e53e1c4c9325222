// What the GPU linear tests share: random weights of every stored type with the values the
// kernels widen them to, and device copies freed by the step device's allocator.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/gpu_testing.h"
#include "exec/cuda/step/device.h"
#include "testing.h"

namespace kvf::testing {

// Random weights [n, k] as stored; each element's value (exact), and as the tensor-core path
// widens it (widened: q8_0/q4_0 values rounded to f16; the same as exact otherwise).
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<double> exact, widened;
};

inline Weights random_weights(DType dt, int64_t n, int64_t k, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  Weights w;
  w.widened.resize(static_cast<size_t>(n * k));
  if (dt == DType::kF32) {
    w.bytes.resize(static_cast<size_t>(n * k * 4));
    for (int64_t i = 0; i < n * k; ++i) {
      const float v = normal(rng);
      std::memcpy(&w.bytes[static_cast<size_t>(4 * i)], &v, 4);
      w.widened[static_cast<size_t>(i)] = v;
    }
    w.exact = w.widened;
    return w;
  }
  if (dt == DType::kF16 || dt == DType::kBF16) {
    w.bytes.resize(static_cast<size_t>(n * k * 2));
    for (int64_t i = 0; i < n * k; ++i) {
      const float v = normal(rng);
      const uint16_t h = dt == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(&w.bytes[static_cast<size_t>(2 * i)], &h, 2);
      w.widened[static_cast<size_t>(i)] = dt == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    w.exact = w.widened;
    return w;
  }
  // q8_0 / q4_0 blocks of 32: an f16 scale, then int8 values or nibbles (low halves first).
  const bool q8 = dt == DType::kQ8_0;
  const int64_t block_bytes = q8 ? 34 : 18, blocks = n * k / 32;
  w.bytes.resize(static_cast<size_t>(blocks * block_bytes));
  w.exact.resize(w.widened.size());
  std::uniform_int_distribution<int> q8v(-127, 127), q4v(0, 15);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = &w.bytes[static_cast<size_t>(b * block_bytes)];
    const uint16_t d = f32_to_f16(std::fabs(normal(rng)) * 0.02f + 1e-3f);
    std::memcpy(blk, &d, 2);
    for (int i = 0; i < 32; ++i) {
      int q = 0;
      if (q8) {
        q = q8v(rng);
        blk[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      } else {
        const int nib = q4v(rng);
        uint8_t& byte = blk[2 + i % 16];
        byte = static_cast<uint8_t>(i < 16 ? (byte & 0xf0) | nib : (byte & 0x0f) | (nib << 4));
        q = nib - 8;
      }
      const float v = f16_to_f32(d) * static_cast<float>(q);
      w.exact[static_cast<size_t>(b * 32 + i)] = v;  // an f16 scale times a small integer: exact in f32
      w.widened[static_cast<size_t>(b * 32 + i)] = f16_to_f32(f32_to_f16(v));
    }
  }
  return w;
}

// A device copy freed with the device's allocator.
struct Dev {
  exec::cuda::step::Device& d;
  void* p = nullptr;
  Dev(exec::cuda::step::Device& dev, const void* src, int64_t bytes) : d(dev) {
    p = must(d.allocate_zeroed(bytes));
    if (src != nullptr) {
      EXPECT_TRUE(d.copy_to_device(p, src, bytes).ok());
    }
  }
  ~Dev() { d.release(p); }
};

}  // namespace kvf::testing
