// How many key splits a GPU decode launch takes (Flash-Decoding): a pure function of the
// launch's shape and the device's, read and tested without a GPU (tests/plan). The CUDA
// decode planner (exec/cuda/attention.cpp) asks it with the device's SM count and its
// kernels' residency.
#pragma once

#include <algorithm>

namespace kvf::plan {

struct DecodeSplitInput {
  long pairs = 1;      // blocks per split: batch x KV heads x row blocks
  int sms = 1;         // multiprocessors
  int per_sm = 1;      // blocks per SM to fill: resident slots (SIMT) or the balance target (tensor cores)
  double want = 0.9;   // the fill of the last round that is good enough
  int span = 1;        // keys of the longest row
};

// Every block does equal work, so the time goes with the most work any unit gets: the
// fewest splits whose blocks fill their last round of sms x per_sm to `want` (else the best
// fill seen), with chunks of at least 128 keys and at most 8 rounds considered.
inline int decode_splits(const DecodeSplitInput& in) {
  const long slots = static_cast<long>(std::max(1, in.sms)) * std::max(1, in.per_sm);
  const int most = std::clamp(in.span / 128, 1, 1024);
  const long pairs = std::max(1L, in.pairs);
  double best = 0.0;
  int splits = 1;
  for (int s = 1; s <= most; ++s) {
    const long blocks = pairs * s;
    const long waves = (blocks + slots - 1) / slots;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * slots);
    if (fill > best + 1e-9) {
      best = fill;
      splits = s;
    }
    if (fill >= in.want || waves > 8) break;
  }
  return splits;
}

// The rule as the decode kernels take it. The SIMT kernel is issue-bound and wants every
// resident slot busy (SMs times the blocks an SM holds): the fewest splits whose blocks fill
// their last wave to 90%. The tensor-core kernel is memory-bound and runs one 8-warp block
// per SM: what counts is the balance of blocks over SMs (B = 1 on the H200: 16 splits,
// B = 8: 2), the fewest splits that fill a round to 95%, dense or paged, whatever an SM
// could hold of it (docs/cuda.md, the split sweeps). resident_per_sm: the kernel's blocks an
// SM holds.
inline int decode_splits_for(bool tensor_cores, long pairs, int sms, int resident_per_sm, int span) {
  return decode_splits({.pairs = pairs,
                        .sms = sms,
                        .per_sm = tensor_cores ? 1 : std::max(1, resident_per_sm),
                        .want = tensor_cores ? 0.95 : 0.9,
                        .span = std::max(1, span)});
}

}  // namespace kvf::plan
