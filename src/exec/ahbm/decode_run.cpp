// Placing the groups, running the engine and summing up (decode_run.h).
#include "exec/ahbm/decode_run.h"

#include <algorithm>
#include <memory>

namespace kvf::ahbm {
namespace {

// Group PEs for every KV head: head h in cube h mod cubes, next to the groups already there.
Status place_groups(Chip& chip, const AhbmConfig& cfg, const DecodeInputs& in, Mapping mapping,
                    std::vector<GroupJob>& jobs, int& max_hops) {
  const HwConfig& hw = cfg.hw;
  std::vector<std::vector<bool>> free(static_cast<size_t>(hw.cubes), std::vector<bool>(static_cast<size_t>(hw.pes_per_cube()), true));
  const ReductionTree tree = make_tree(in.geom.n);
  for (int64_t h = 0; h < in.dims.n_kv_heads; ++h) {
    const int cube = static_cast<int>(h % hw.cubes);
    Result<std::vector<MeshPos>> pos = embed_tree(tree, hw.mesh_rows, hw.mesh_cols, free[static_cast<size_t>(cube)], mapping);
    if (!pos) return pos.take_error().context("placing KV head ", h, " on cube ", cube);
    max_hops = std::max(max_hops, max_edge_hops(tree, *pos));
    GroupJob& job = jobs[static_cast<size_t>(h)];
    job.head = h;
    job.tree = tree;
    job.out.assign(static_cast<size_t>(in.dims.group() * in.dims.head_dim), 0.0f);
    for (const MeshPos& p : *pos) {
      free[static_cast<size_t>(cube)][static_cast<size_t>(p.row * hw.mesh_cols + p.col)] = false;
      job.pe.push_back(&chip.pe_at(cube, p.row, p.col));
    }
  }
  return {};
}

void add_unit(UnitTotals& t, const Unit& u) {
  t.busy += u.busy_cycles();
  t.amount += u.amount();
}

void finish_utilization(UnitTotals& t, Cycle cycles, int units) {
  t.utilization = cycles > 0 && units > 0 ? static_cast<double>(t.busy) / (static_cast<double>(cycles) * units) : 0;
}

void sum_units(DecodeReport& r, const std::vector<GroupJob>& jobs, Cycle cycles) {
  for (const GroupJob& job : jobs) {
    for (const Pe* p : job.pe) {
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
}

void sum_kernels(DecodeReport& r, const std::vector<GroupJob>& jobs,
                 const std::vector<std::unique_ptr<PeKernel>>& kernels, int n) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelStats& s = kernels[i]->stats();
    r.composites += s.composites;
    r.tiles += s.tiles;
    r.mask_tiles += s.mask_tiles;
    r.dma_k_bytes += s.dma_k_bytes;
    r.dma_v_bytes += s.dma_v_bytes;
    r.dma_o_bytes += s.dma_o_bytes;
    r.polls += s.polls;
    r.poll_hits += s.poll_hits;
    r.spins += s.spins;
    r.spin_cycles += s.spin_cycles;
    r.sweep_end = std::max(r.sweep_end, s.sweep_end);
  }
  r.poll_on_critical_path = r.spins > 0;
  for (size_t h = 0; h < jobs.size(); ++h) {
    Cycle last_sweep = 0;
    for (int k = 0; k < n; ++k) last_sweep = std::max(last_sweep, kernels[h * static_cast<size_t>(n) + static_cast<size_t>(k)]->stats().sweep_end);
    r.reduction_cycles = std::max(r.reduction_cycles, jobs[h].done_at - last_sweep);
  }
}

}  // namespace

Result<DecodeReport> run_decode(const AhbmConfig& cfg, const DecodeInputs& in, const RunOptions& opts) {
  Status s = validate(cfg);
  if (!s) return s.take_error();
  const int n = in.geom.n;
  if (in.dims.n_kv_heads <= 0 || in.dims.n_heads % in.dims.n_kv_heads != 0) {
    return invalid_input("ahbm: n_heads ", in.dims.n_heads, " is not a multiple of n_kv_heads ", in.dims.n_kv_heads);
  }
  if (in.geom.counter < 1) return invalid_input("ahbm: decode needs a context of at least one token");
  Engine engine;
  Chip chip(engine, cfg.hw);
  std::vector<GroupJob> jobs(static_cast<size_t>(in.dims.n_kv_heads));
  DecodeReport r;
  s = place_groups(chip, cfg, in, opts.mapping, jobs, r.max_edge_hops);
  if (!s) return s.take_error();
  r.tree_depth = jobs.front().tree.depth;
  r.active_pes = static_cast<int>(jobs.size()) * n;

  std::vector<std::unique_ptr<CompositeQueue>> queues;
  std::vector<std::unique_ptr<PeKernel>> kernels;
  for (GroupJob& job : jobs) {
    for (Pe* p : job.pe) {
      queues.push_back(std::make_unique<CompositeQueue>(chip, *p));
      job.queue.push_back(queues.back().get());
    }
    for (int k = 0; k < n; ++k) kernels.push_back(std::make_unique<PeKernel>(chip, cfg, in, job, k, opts.faults));
  }
  for (auto& k : kernels) {
    s = k->start();
    if (!s) return s.take_error();
  }
  s = engine.run();
  if (!s) return s.take_error();
  s = chip.check_no_blocked_senders();
  if (!s) return s.take_error();
  for (auto& k : kernels) {
    if (!k->finished()) return internal_error("ahbm deadlock at cycle ", engine.now(), ": nothing left to run but ", k->waiting_on());
  }

  for (const GroupJob& job : jobs) r.cycles = std::max(r.cycles, job.done_at);
  r.simulated_us = static_cast<double>(r.cycles) / (cfg.hw.clock_ghz * 1e3);
  r.events = engine.events();
  r.ipcq = chip.traffic();
  sum_kernels(r, jobs, kernels, n);
  sum_units(r, jobs, r.cycles);
  for (const auto& q : queues)
    for (size_t op = 0; op < r.stages.size(); ++op) r.stages[op] += q->stage_counts()[op];
  for (const GroupJob& job : jobs) r.out.insert(r.out.end(), job.out.begin(), job.out.end());
  return r;
}

}  // namespace kvf::ahbm
