// One decode launch on the simulated chip: every KV head gets a reduction group of N PEs in
// its own CUBE (heads beyond the cube count share cubes), the kernel runs on each group PE,
// and the report gathers simulated time, bytes, utilization, IPCQ traffic and the
// reduction's cost. decode (no SP) is N = 1; decode-sp is N > 1 (ADR §5.2, §5.3).
#pragma once

#include <array>
#include <vector>

#include "exec/ahbm/chip.h"
#include "exec/ahbm/decode_kernel.h"

namespace kvf::ahbm {

struct RunOptions {
  Mapping mapping = Mapping::kNeighbour;
  KernelFaults faults;
};

struct UnitTotals {
  Cycle busy = 0;
  int64_t amount = 0;        // bytes (dma, links), MACs (mm), elements (vec)
  double utilization = 0;    // busy / (simulated cycles x units of this kind on active PEs)
};

struct DecodeReport {
  Cycle cycles = 0;          // launch to the last root's store
  double simulated_us = 0;
  int64_t events = 0;
  int active_pes = 0;
  int64_t composites = 0, tiles = 0, mask_tiles = 0;
  int64_t dma_k_bytes = 0, dma_v_bytes = 0, dma_o_bytes = 0;
  UnitTotals dma, mm, vec, ctl, link;
  IpcqTraffic ipcq;
  int tree_depth = 0, max_edge_hops = 0;
  Cycle sweep_end = 0;           // the latest tile composite to complete, over all PEs
  Cycle reduction_cycles = 0;    // max over heads: root stored O minus the group's last sweep end
  bool poll_on_critical_path = false;  // some PE spun with no tile left to issue
  int64_t polls = 0, poll_hits = 0, spins = 0;
  Cycle spin_cycles = 0;
  int64_t sram_bytes_per_pe = 0;
  std::array<int64_t, 6> stages{};  // composite stages submitted, by StageOp
  std::vector<float> out;        // [n_heads, head_dim]
};

Result<DecodeReport> run_decode(const AhbmConfig& cfg, const DecodeInputs& in, const RunOptions& opts = {});

}  // namespace kvf::ahbm
