// Prefill attention, head dim 128: one head dim per file so nvcc runs in parallel.
#include "exec/cuda/prefill_attention.cuh"

namespace kvf::exec::cuda::detail {

int launch_prefill_d128(const PrefillParams& p, void* stream) { return launch_prefill<PrefillTraitsFor<128>>(p, stream); }
int launch_step_prefill_d128(const StepPrefillParams& s, void* stream) {
  return launch_step_prefill_as<PrefillTraitsFor<128>>(s, stream);
}

}  // namespace kvf::exec::cuda::detail
