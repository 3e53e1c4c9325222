// Bounds on one render. Templates are untrusted input: each limit turns a runaway template
// (deep macro recursion, huge loops or strings) into a typed kCapacity error, never a hang.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvf::chat {

struct RenderLimits {
  size_t max_output_bytes = size_t{4} << 20;  // also bounds every string a template builds
  int max_call_depth = 64;                    // nested macro calls
  int64_t max_steps = 5'000'000;              // statements, loop iterations and calls, summed
  size_t max_sequence = 100'000;              // items in one range() or repeated list
};

}  // namespace kvf::chat
