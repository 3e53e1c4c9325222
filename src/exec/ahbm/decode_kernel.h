// The ADR's decode attention kernel on one PE (§5.1-5.3, §5.6): derive the geometry from
// the counter, keep `prefetch` tile composites in flight, then take part in the log-sum-exp
// tree: leaves push (m, l, O) as the tail of their last composite, inner nodes poll their
// children's directions (a bounded poll, issuing tile work on a miss while any is left, a
// short spin otherwise), merge, and push on; the root normalizes and stores O. The control
// flow here is the kernel's; the composites only execute what it decided (ADR §7).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "exec/ahbm/attn_tile.h"
#include "exec/ahbm/composite.h"
#include "exec/ahbm/config.h"
#include "exec/ahbm/decode_inputs.h"
#include "exec/ahbm/flash_math.h"
#include "exec/ahbm/tree.h"

namespace kvf::ahbm {

// Faults the tests inject to prove the engine notices a stuck reduction.
struct KernelFaults {
  int drop_push_of_rank = -1;  // this rank finishes without sending its partial
};

// One KV head on its reduction group of N PEs.
struct GroupJob {
  int64_t head = 0;
  ReductionTree tree;
  std::vector<Pe*> pe;                 // by group rank (= pe_id)
  std::vector<CompositeQueue*> queue;  // by group rank
  std::vector<float> out;              // [group, head_dim]: written by the root
  Cycle done_at = -1;
};

struct KernelStats {
  int64_t composites = 0, tiles = 0;
  int64_t dma_k_bytes = 0, dma_v_bytes = 0, dma_o_bytes = 0, mask_tiles = 0;
  int64_t polls = 0, poll_hits = 0, spins = 0;
  Cycle spin_cycles = 0;       // waiting after the sweep with no tile left to issue
  Cycle sweep_end = -1;        // the last tile's attention work done (before any tail push)
  Cycle done_at = -1;          // pushed (or stored, at the root)
};

class PeKernel {
 public:
  PeKernel(Chip& chip, const AhbmConfig& cfg, const DecodeInputs& in, GroupJob& job, int rank, KernelFaults faults);
  PeKernel(const PeKernel&) = delete;
  PeKernel& operator=(const PeKernel&) = delete;

  // Checks SRAM residency, then primes the prefetch window.
  Status start();
  bool finished() const { return stats_.done_at >= 0; }
  std::string waiting_on() const;  // for the deadlock report
  const KernelStats& stats() const { return stats_; }

 private:
  int64_t rows() const { return cfg_.kernel.gqa_batch ? group_ : 1; }
  int64_t streams() const { return cfg_.kernel.gqa_batch ? 1 : group_; }
  int64_t esize() const;
  int64_t sram_bytes() const;
  bool is_leaf() const { return job_.tree.children[static_cast<size_t>(rank_)].empty(); }
  bool is_root() const { return rank_ == job_.tree.root; }
  bool tail_push() const;

  void issue_more();
  Composite build(int64_t k, int slot);
  void on_composite_done(int slot);
  void poll(bool after_sweep);
  void on_polled(bool after_sweep);
  void drain();
  void on_sweep_done();
  void finish_reduction();
  void finish();
  FlashState own_state() const;
  Message partial(const FlashState& s) const;

  Chip& chip_;
  const AhbmConfig& cfg_;
  const DecodeInputs& in_;
  GroupJob& job_;
  int rank_;
  KernelFaults faults_;
  Pe& pe_;
  const PeKv& kv_;
  int64_t group_, d_, len_, n_tiles_;
  float scale_;

  std::vector<FlashState> state_;   // per stream
  std::vector<TileBuffers> buf_;    // one per prefetch slot
  std::vector<int> free_slots_;
  int64_t next_ = 0, done_ = 0;
  bool sweep_done_ = false, polling_ = false, reduced_ = false, tail_pushed_ = false;
  int merges_ = 0;                  // child merges queued on the VEC unit
  std::set<int> pending_children_;
  FlashState children_;             // merge of the partials received so far
  int64_t misses_in_a_row_ = 0;
  KernelStats stats_;
};

}  // namespace kvf::ahbm
