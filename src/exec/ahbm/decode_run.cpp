// Placing the groups, running the engine and summing up (decode_run.h).
#include "exec/ahbm/decode_run.h"

#include <algorithm>
#include <memory>

namespace kvf::ahbm {
namespace {

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
  DecodeReport r;
  const ReductionTree tree = make_tree(n);
  Result<std::vector<std::vector<Pe*>>> groups =
      place_heads(chip, in.dims.n_kv_heads, [&](int rows, int cols, const std::vector<bool>& free) {
        Result<std::vector<MeshPos>> pos = embed_tree(tree, rows, cols, free, opts.mapping);
        if (pos) r.max_edge_hops = std::max(r.max_edge_hops, max_edge_hops(tree, *pos));
        return pos;
      });
  if (!groups) return groups.take_error();
  r.tree_depth = tree.depth;

  std::vector<std::unique_ptr<CompositeQueue>> queues;
  const std::vector<std::vector<CompositeQueue*>> by_head = make_queues(chip, *groups, queues);
  std::vector<GroupJob> jobs(static_cast<size_t>(in.dims.n_kv_heads));
  std::vector<std::unique_ptr<PeKernel>> kernels;
  for (size_t h = 0; h < jobs.size(); ++h) {
    GroupJob& job = jobs[h];
    job.head = static_cast<int64_t>(h);
    job.tree = tree;
    job.pe = (*groups)[h];
    job.queue = by_head[h];
    job.out.assign(static_cast<size_t>(in.dims.group() * in.dims.head_dim), 0.0f);
    for (int k = 0; k < n; ++k) kernels.push_back(std::make_unique<PeKernel>(chip, cfg, in, job, k, opts.faults));
  }
  s = run_kernels(engine, chip, kernels);
  if (!s) return s.take_error();

  Cycle cycles = 0;
  for (const GroupJob& job : jobs) cycles = std::max(cycles, job.done_at);
  sum_run(r, cycles, chip, engine, *groups, queues);
  sum_kernels(r, jobs, kernels, n);
  for (const GroupJob& job : jobs) r.out.insert(r.out.end(), job.out.begin(), job.out.end());
  return r;
}

}  // namespace kvf::ahbm
