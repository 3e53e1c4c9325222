// One prefill launch on the simulated chip: every KV head gets a ring of N PEs in its own
// CUBE (N = 1: prefill without SP, ADR §5.4; N > 1: ring attention, §5.5), the kernel runs
// on each ring PE, and the report gathers simulated time, bytes, utilization, the causal
// skips (tiles and whole ring steps), the ring's IPCQ traffic and its stalls.
#pragma once

#include <vector>

#include "exec/ahbm/prefill_kernel.h"
#include "exec/ahbm/run_common.h"

namespace kvf::ahbm {

struct PrefillOptions {
  Mapping mapping = Mapping::kNeighbour;  // ring ranks on the mesh
};

struct PrefillReport : RunTotals {
  int64_t tiles = 0, tiles_skipped = 0, mask_tiles = 0;
  int64_t steps = 0, steps_skipped = 0;  // ring steps over every PE (N per PE), and those with no composite
  int64_t dma_q_bytes = 0, dma_k_bytes = 0, dma_v_bytes = 0, dma_o_bytes = 0, dma_state_bytes = 0, ring_dma_bytes = 0;
  int64_t ring_entries = 0, ring_bytes = 0;
  int max_ring_hops = 0;
  int max_recv_buffers = 0;
  int64_t polls = 0, poll_hits = 0, spins = 0;
  Cycle spin_cycles = 0;
  Cycle max_starved_cycles = 0;   // the most any PE waited for a ring block with composites left to issue
  Cycle compute_end = 0;          // the latest composite to complete, over all PEs
  std::vector<float> out;         // [value_heads * G, q_len, head_dim]
  double step_skip_fraction() const { return steps > 0 ? static_cast<double>(steps_skipped) / static_cast<double>(steps) : 0; }
};

Result<PrefillReport> run_prefill(const AhbmConfig& cfg, const PrefillInputs& in, const PrefillOptions& opts = {});

}  // namespace kvf::ahbm
