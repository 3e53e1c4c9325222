// The ADR's prefill attention kernel on one PE (§5.1, §5.4, §5.5). From positions alone it
// plans every composite before it starts: a KV tile after the whole query block
// (tile_all_future) is not enqueued, a tile across the diagonal or ragged (tile_partial)
// gets a mask tile the kernel builds, a tile wholly before it (tile_all_past) the null mask.
// Query blocks of q_block tokens (G * q_block rows with GQA batching) each start from a
// fresh (m, l, O), keep `prefetch` composites in flight and end with O normalized and
// stored. On a ring (N > 1) step s computes against the KV block of rank (p - s) mod N:
// the block arrives from the predecessor as IPCQ entries, which the kernel pops into one
// of two receive buffers while step s - 1 computes, and it is forwarded to the successor
// (even when the step is skipped, so the ring keeps moving). Each query block's running
// state lives in the PE's memory between steps (DMA out and back in). No SP is N = 1.
#pragma once

#include <string>
#include <vector>

#include "exec/ahbm/attn_tile.h"
#include "exec/ahbm/config.h"
#include "exec/ahbm/prefill_inputs.h"

namespace kvf::ahbm {

// One KV head on its ring of N PEs (N = 1: no SP).
struct RingJob {
  int64_t head = 0;
  bool values = true;                  // false: timing only (a KV head the run does not verify)
  std::vector<Pe*> pe;                 // by ring rank
  std::vector<CompositeQueue*> queue;  // by ring rank
  std::vector<float> out;              // [group, q_len, head_dim]: each rank stores its queries; NaN until then
};

struct PrefillStats {
  int64_t composites = 0, tiles = 0, tiles_skipped = 0, mask_tiles = 0;
  int64_t steps = 0, steps_skipped = 0;  // ring steps with no composite (the causal ring skip)
  int64_t dma_q_bytes = 0, dma_k_bytes = 0, dma_v_bytes = 0, dma_o_bytes = 0;
  int64_t dma_state_bytes = 0;           // running state out to memory between ring steps and back
  int64_t ring_dma_bytes = 0;            // received entries written to a buffer, forwarded ones read
  int64_t ring_entries = 0, ring_bytes = 0;  // sent to the successor
  int64_t polls = 0, poll_hits = 0, spins = 0;
  Cycle spin_cycles = 0;                 // waiting for the predecessor with nothing to issue
  Cycle starved_cycles = 0;              // of those, while composites were left to issue (the ring on the critical path)
  int max_recv_buffers = 0;              // receive buffers in use at once (ping-pong: at most 2)
  Cycle compute_end = -1;                // the last composite completed
  Cycle done_at = -1;                    // and the ring traffic finished
};

class PrefillKernel {
 public:
  PrefillKernel(Chip& chip, const AhbmConfig& cfg, const PrefillInputs& in, RingJob& job, int rank);
  PrefillKernel(const PrefillKernel&) = delete;
  PrefillKernel& operator=(const PrefillKernel&) = delete;

  // Checks SRAM residency, plans the composites, then primes the prefetch window.
  Status start();
  bool finished() const { return stats_.done_at >= 0; }
  std::string waiting_on() const;  // for the deadlock report
  const PrefillStats& stats() const { return stats_; }
  int64_t sram_bytes() const;

 private:
  // One composite: KV tile `tile` of ring step `step`'s block against query block `block`
  // (and query head `head` without GQA batching). A run is the composites of one
  // (step, block, head); it opens with the Q (and state) load and closes with the state
  // spill or, on the stream's last step, the normalize and store of O.
  struct Item {
    int step = 0;
    int64_t block = 0, head = 0, tile = 0;
    bool masked = false, opens = false, closes = false, fresh = false, final = false;
  };
  struct PairSlot {        // SRAM of one (step, block) in flight
    std::vector<float> q;  // [group * q_block, head_dim]
    FlashState state;
  };
  struct RecvBuffer {      // a ring block in the PE's memory
    std::vector<float> k, v;  // [kv_cap, head_dim]
  };

  int64_t esize() const { return element_bytes(in_.storage); }
  int64_t rows() const { return cfg_.kernel.gqa_batch ? group_ * qb_ : qb_; }
  int64_t streams() const { return cfg_.kernel.gqa_batch ? 1 : group_; }
  int source(int step) const { return (rank_ - step % n_ + n_) % n_; }  // whose block step computes
  int64_t block_len(int rank) const { return n_ == 1 ? in_.context() : shard_len(in_.shards, rank); }
  int64_t block_entries(int rank) const;
  int64_t q_valid(int64_t block) const { return std::min(qb_, q_len_ - block * qb_); }
  int64_t query_pos(int64_t block, int64_t i) const;
  int pair(const Item& it) const { return it.step * static_cast<int>(n_blocks_) + static_cast<int>(it.block); }

  void plan();
  void progress();
  void issue_more();
  Composite build(size_t k, int slot);
  void build_mask(const Item& it, int64_t valid, std::vector<float>& mask) const;
  void on_composite_done(size_t k, int slot);
  const float* block_k(int step) const;
  const float* block_v(int step) const;
  void release_buffers();
  void start_forward();
  void send_entry();
  bool can_receive() const;
  void maybe_poll();
  void on_polled();
  void maybe_finish();

  Chip& chip_;
  const AhbmConfig& cfg_;
  const PrefillInputs& in_;
  RingJob& job_;
  int rank_, n_;
  Pe& pe_;
  const PeShard& shard_;
  int64_t group_, d_, tile_, qb_, q_len_, n_blocks_;
  float scale_;

  std::vector<Item> plan_;
  size_t next_ = 0;
  std::vector<TileBuffers> buf_;  // one per prefetch slot
  std::vector<int> free_slots_;
  std::vector<PairSlot> pairs_;   // one per prefetch slot
  std::vector<int> free_pairs_, pair_slot_, pair_left_;
  std::vector<FlashState> spilled_;  // [n_blocks]: running state between ring steps

  // Ring state, by step.
  std::vector<int64_t> step_planned_, step_done_;
  std::vector<bool> ready_, forwarded_, released_;
  std::vector<int> step_buf_;
  std::vector<RecvBuffer> rbufs_;
  std::vector<int> free_rbufs_;
  int rbufs_in_use_ = 0;
  int recv_step_ = 1, send_step_ = 0;
  int64_t recv_entry_ = 0, send_entry_ = 0;
  bool polling_ = false, receiving_ = false, sending_ = false, spinning_ = false;
  Cycle spin_from_ = 0;
  PrefillStats stats_;
};

}  // namespace kvf::ahbm
