// One decode launch on the simulated chip: every KV head gets a reduction group of N PEs in
// its own CUBE (heads beyond the cube count share cubes), the kernel runs on each group PE,
// and the report gathers simulated time, bytes, utilization, IPCQ traffic and the
// reduction's cost. decode (no SP) is N = 1; decode-sp is N > 1 (ADR §5.2, §5.3).
#pragma once

#include <vector>

#include "exec/ahbm/decode_kernel.h"
#include "exec/ahbm/run_common.h"

namespace kvf::ahbm {

struct RunOptions {
  Mapping mapping = Mapping::kNeighbour;
  KernelFaults faults;
};

struct DecodeReport : RunTotals {
  int64_t tiles = 0, mask_tiles = 0;
  int64_t dma_k_bytes = 0, dma_v_bytes = 0, dma_o_bytes = 0;
  int tree_depth = 0, max_edge_hops = 0;
  Cycle sweep_end = 0;           // the latest end of a tile sweep (attention work, before tail pushes), over all PEs
  Cycle reduction_cycles = 0;    // max over heads: root stored O minus the group's last sweep end
  bool poll_on_critical_path = false;  // some PE spun with no tile left to issue
  int64_t polls = 0, poll_hits = 0, spins = 0;
  Cycle spin_cycles = 0;
  std::vector<float> out;        // [n_heads, head_dim]
};

Result<DecodeReport> run_decode(const AhbmConfig& cfg, const DecodeInputs& in, const RunOptions& opts = {});

}  // namespace kvf::ahbm
