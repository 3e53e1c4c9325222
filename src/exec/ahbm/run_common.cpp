// Group placement and chip totals shared by the runs (run_common.h).
#include "exec/ahbm/run_common.h"

#include <algorithm>

namespace kvf::ahbm {
namespace {

void add_unit(UnitTotals& t, const Unit& u) {
  t.busy += u.busy_cycles();
  t.amount += u.amount();
}

void finish_utilization(UnitTotals& t, Cycle cycles, int units) {
  t.utilization = cycles > 0 && units > 0 ? static_cast<double>(t.busy) / (static_cast<double>(cycles) * units) : 0;
}

}  // namespace

Result<std::vector<std::vector<Pe*>>> place_heads(Chip& chip, int64_t n_kv_heads, const Embed& embed) {
  const HwConfig& hw = chip.hw();
  std::vector<std::vector<bool>> free(static_cast<size_t>(hw.cubes), std::vector<bool>(static_cast<size_t>(hw.pes_per_cube()), true));
  std::vector<std::vector<Pe*>> groups(static_cast<size_t>(n_kv_heads));
  for (int64_t h = 0; h < n_kv_heads; ++h) {
    const int cube = static_cast<int>(h % hw.cubes);
    std::vector<bool>& cells = free[static_cast<size_t>(cube)];
    Result<std::vector<MeshPos>> pos = embed(hw.mesh_rows, hw.mesh_cols, cells);
    if (!pos) return pos.take_error().context("placing KV head ", h, " on cube ", cube);
    for (const MeshPos& p : *pos) {
      cells[static_cast<size_t>(p.row * hw.mesh_cols + p.col)] = false;
      groups[static_cast<size_t>(h)].push_back(&chip.pe_at(cube, p.row, p.col));
    }
  }
  return groups;
}

std::vector<std::vector<CompositeQueue*>> make_queues(Chip& chip, const std::vector<std::vector<Pe*>>& groups,
                                                      std::vector<std::unique_ptr<CompositeQueue>>& owner) {
  std::vector<std::vector<CompositeQueue*>> queues;
  for (const std::vector<Pe*>& group : groups) {
    queues.emplace_back();
    for (Pe* p : group) {
      owner.push_back(std::make_unique<CompositeQueue>(chip, *p));
      queues.back().push_back(owner.back().get());
    }
  }
  return queues;
}

void sum_run(RunTotals& r, Cycle cycles, const Chip& chip, const Engine& engine,
             const std::vector<std::vector<Pe*>>& groups, const std::vector<std::unique_ptr<CompositeQueue>>& queues) {
  r.cycles = cycles;
  r.simulated_us = static_cast<double>(cycles) / (chip.hw().clock_ghz * 1e3);
  r.events = engine.events();
  r.ipcq = chip.traffic();
  r.active_pes = 0;
  for (const std::vector<Pe*>& group : groups) {
    r.active_pes += static_cast<int>(group.size());
    for (const Pe* p : group) {
      add_unit(r.dma, p->dma);
      add_unit(r.mm, p->mm);
      add_unit(r.vec, p->vec);
      add_unit(r.ctl, p->ctl);
      for (const auto& l : p->link) add_unit(r.link, *l);
      r.sram_bytes_per_pe = std::max(r.sram_bytes_per_pe, p->sram_used);
    }
  }
  finish_utilization(r.dma, cycles, r.active_pes);
  finish_utilization(r.mm, cycles, r.active_pes);
  finish_utilization(r.vec, cycles, r.active_pes);
  finish_utilization(r.ctl, cycles, r.active_pes);
  finish_utilization(r.link, cycles, 4 * r.active_pes);
  for (const auto& q : queues)
    for (size_t op = 0; op < r.stages.size(); ++op) r.stages[op] += q->stage_counts()[op];
}

}  // namespace kvf::ahbm
