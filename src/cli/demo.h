// `kvforge demo`: a toy llama on the oracle — prefill, cached decode, timings, memory bill.
#pragma once

#include <cstdint>

#include "core/error.h"

namespace kvf::cli {

struct DemoOptions {
  int64_t layers = 4;
  int64_t dim = 256;
  int64_t heads = 8;
  int64_t kv_heads = 2;
  int64_t capacity = 128;
  int64_t prompt_len = 16;
  int64_t steps = 32;
  uint64_t seed = 42;
  int threads = 2;
};

Status run_demo(const DemoOptions& opts);

}  // namespace kvf::cli
