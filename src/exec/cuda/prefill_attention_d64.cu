// Prefill attention, head dim 64: one head dim per file so nvcc runs in parallel.
#include "exec/cuda/prefill_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_prefill_d64(const PrefillParams& p, void* stream) { return launch_prefill<PrefillTraitsFor<64>>(p, stream); }
int launch_step_prefill_d64(const StepPrefillParams& s, void* stream) {
  return launch_step_prefill_as<PrefillTraitsFor<64>>(s, stream);
}

}  // namespace kvf::exec::cuda::detail
