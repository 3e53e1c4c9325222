// What the decode and prefill runs share: each KV head's group of N PEs placed in its cube
// (head h in cube h mod cubes, next to the groups already there), and the chip totals of a
// finished run (simulated time, busy cycles and amounts per unit kind, IPCQ traffic,
// composite stages by kind). decode_run.h and prefill_run.h add what their kernels measure.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "exec/ahbm/composite.h"
#include "exec/ahbm/tree.h"

namespace kvf::ahbm {

struct UnitTotals {
  Cycle busy = 0;
  int64_t amount = 0;        // bytes (dma, links), MACs (mm), elements (vec)
  double utilization = 0;    // busy / (simulated cycles x units of this kind on active PEs)
};

struct RunTotals {
  Cycle cycles = 0;          // launch to the last store
  double simulated_us = 0;
  int64_t events = 0;
  int active_pes = 0;
  int64_t composites = 0;
  UnitTotals dma, mm, vec, ctl, link;
  IpcqTraffic ipcq;
  int64_t sram_bytes_per_pe = 0;
  std::array<int64_t, 6> stages{};  // composite stages submitted, by StageOp
};

// Mesh positions for one group among a cube's free cells (embed_tree, embed_ring).
using Embed = std::function<Result<std::vector<MeshPos>>(int rows, int cols, const std::vector<bool>& free)>;

// The PEs of each KV head's group, by group rank.
Result<std::vector<std::vector<Pe*>>> place_heads(Chip& chip, int64_t n_kv_heads, const Embed& embed);

// A composite queue per group PE, by head then rank.
std::vector<std::vector<CompositeQueue*>> make_queues(Chip& chip, const std::vector<std::vector<Pe*>>& groups,
                                                      std::vector<std::unique_ptr<CompositeQueue>>& owner);

// Starts every kernel, runs the engine until nothing is left, and turns whatever is still
// waiting into a typed deadlock (a sender on a full queue, a kernel that did not finish).
template <class Kernel>
Status run_kernels(Engine& engine, const Chip& chip, const std::vector<std::unique_ptr<Kernel>>& kernels) {
  for (const auto& k : kernels) {
    Status s = k->start();
    if (!s) return s;
  }
  Status s = engine.run();
  if (!s) return s;
  s = chip.check_no_blocked_senders();
  if (!s) return s;
  for (const auto& k : kernels) {
    if (!k->finished()) return internal_error("ahbm deadlock at cycle ", engine.now(), ": nothing left to run but ", k->waiting_on());
  }
  return {};
}

// Fills every RunTotals field but `composites` once the engine has drained at `cycles`.
void sum_run(RunTotals& r, Cycle cycles, const Chip& chip, const Engine& engine,
             const std::vector<std::vector<Pe*>>& groups, const std::vector<std::unique_ptr<CompositeQueue>>& queues);

}  // namespace kvf::ahbm
