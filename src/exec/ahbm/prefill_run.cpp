// Placing the rings, running the engine and summing up (prefill_run.h).
#include "exec/ahbm/prefill_run.h"

#include <algorithm>
#include <limits>
#include <memory>

namespace kvf::ahbm {
namespace {

void sum_kernels(PrefillReport& r, const std::vector<std::unique_ptr<PrefillKernel>>& kernels) {
  for (const auto& k : kernels) {
    const PrefillStats& s = k->stats();
    r.composites += s.composites;
    r.tiles += s.tiles;
    r.tiles_skipped += s.tiles_skipped;
    r.mask_tiles += s.mask_tiles;
    r.steps += s.steps;
    r.steps_skipped += s.steps_skipped;
    r.dma_q_bytes += s.dma_q_bytes;
    r.dma_k_bytes += s.dma_k_bytes;
    r.dma_v_bytes += s.dma_v_bytes;
    r.dma_o_bytes += s.dma_o_bytes;
    r.dma_state_bytes += s.dma_state_bytes;
    r.ring_dma_bytes += s.ring_dma_bytes;
    r.ring_entries += s.ring_entries;
    r.ring_bytes += s.ring_bytes;
    r.polls += s.polls;
    r.poll_hits += s.poll_hits;
    r.spins += s.spins;
    r.spin_cycles += s.spin_cycles;
    r.max_starved_cycles = std::max(r.max_starved_cycles, s.starved_cycles);
    r.max_recv_buffers = std::max(r.max_recv_buffers, s.max_recv_buffers);
    r.compute_end = std::max(r.compute_end, s.compute_end);
  }
}

}  // namespace

Result<PrefillReport> run_prefill(const AhbmConfig& cfg, const PrefillInputs& in, const PrefillOptions& opts) {
  Status s = validate(cfg);
  if (!s) return s.take_error();
  const int n = in.n();
  if (in.dims.n_kv_heads <= 0 || in.dims.n_heads % in.dims.n_kv_heads != 0) {
    return invalid_input("ahbm: n_heads ", in.dims.n_heads, " is not a multiple of n_kv_heads ", in.dims.n_kv_heads);
  }
  if (in.q_len < 1) return invalid_input("ahbm: prefill needs at least one query token");
  if (n > 1 && in.q_start != 0) {
    return unsupported("ahbm: ring attention over a chunk that continues a prompt (q_start ", in.q_start,
                       "): the ring shards one whole prompt");
  }
  Engine engine;
  Chip chip(engine, cfg.hw);
  PrefillReport r;
  Result<std::vector<std::vector<Pe*>>> groups =
      place_heads(chip, in.dims.n_kv_heads, [&](int rows, int cols, const std::vector<bool>& free) {
        Result<std::vector<MeshPos>> pos = embed_ring(n, rows, cols, free, opts.mapping);
        if (pos) r.max_ring_hops = std::max(r.max_ring_hops, n > 1 ? max_ring_hops(*pos) : 0);
        return pos;
      });
  if (!groups) return groups.take_error();

  std::vector<std::unique_ptr<CompositeQueue>> queues;
  const std::vector<std::vector<CompositeQueue*>> by_head = make_queues(chip, *groups, queues);
  std::vector<RingJob> jobs(static_cast<size_t>(in.dims.n_kv_heads));
  std::vector<std::unique_ptr<PrefillKernel>> kernels;
  for (size_t h = 0; h < jobs.size(); ++h) {
    RingJob& job = jobs[h];
    job.head = static_cast<int64_t>(h);
    job.values = job.head < in.value_heads;
    job.pe = (*groups)[h];
    job.queue = by_head[h];
    if (job.values) job.out.assign(static_cast<size_t>(in.dims.group() * in.q_len * in.dims.head_dim), std::numeric_limits<float>::quiet_NaN());
    for (int k = 0; k < n; ++k) kernels.push_back(std::make_unique<PrefillKernel>(chip, cfg, in, job, k));
  }
  s = run_kernels(engine, chip, kernels);
  if (!s) return s.take_error();
  Cycle cycles = 0;
  for (const auto& k : kernels) cycles = std::max(cycles, k->stats().done_at);
  sum_run(r, cycles, chip, engine, *groups, queues);
  sum_kernels(r, kernels);
  for (const RingJob& job : jobs) r.out.insert(r.out.end(), job.out.begin(), job.out.end());
  return r;
}

}  // namespace kvf::ahbm
