// What a device offers the planner (DESIGN.md §3): measured from the machine, never assumed.
#pragma once

#include <cstdint>
#include <string>

namespace kvf::plan {

enum class Target : uint8_t { kCpu, kCuda };

struct DeviceCaps {
  Target target = Target::kCpu;
  std::string name = "cpu";
  int cores = 1;                 // threads the executor will run
  int64_t l1d_bytes = 32 << 10;  // per core
  int64_t l2_bytes = 1 << 20;    // per core
  int64_t l3_bytes = 0;          // shared; 0 if none reported
  int simd_bytes = 16;           // widest vector the kernels use: 64 (AVX-512), 32 (AVX2), 16
  // The running state of one attention lane (o[dv], m, l) must fit here; on the CPU a core's
  // L1d is the analogue of a GPU workgroup's local memory.
  int64_t lane_state_bytes = 32 << 10;
  int64_t max_scratch_bytes = int64_t{1} << 30;  // the largest plan-local buffer it allocates
  bool has_f16_kv = true;        // reads f16 K/V in the attention kernel
  // May compute products from 16-bit inputs where the tensor cores run them (linears over
  // 16-bit or quantized weights, causal prefill attention over an f16 cache): the inputs
  // are rounded to f16/bf16, the sums stay f32. False: every product from f32 inputs.
  bool half_compute = false;
};

// The CPU this process runs on: cores (or `threads` when > 0), cache sizes from sysfs,
// SIMD width from the CPU's feature flags.
DeviceCaps cpu_caps(int threads = 0);

std::string describe(const DeviceCaps& caps);  // "cpu: 2 cores, avx512, L1d 32 KiB, ..."

}  // namespace kvf::plan
