// The per-PE prefill kernel (prefill_kernel.h).
#include "exec/ahbm/prefill_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace kvf::ahbm {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

PrefillKernel::PrefillKernel(Chip& chip, const AhbmConfig& cfg, const PrefillInputs& in, RingJob& job, int rank)
    : chip_(chip), cfg_(cfg), in_(in), job_(job), rank_(rank), n_(in.n()), pe_(*job.pe[static_cast<size_t>(rank)]),
      shard_(in.pe[static_cast<size_t>(job.head)][static_cast<size_t>(rank)]), group_(in.dims.group()),
      d_(in.dims.head_dim), tile_(cfg.kernel.tile), qb_(cfg.kernel.q_block),
      q_len_(n_ == 1 ? in.q_len : shard_len(in.shards, rank)), n_blocks_((q_len_ + qb_ - 1) / qb_),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(in.dims.head_dim)))) {}

// Per prefetch slot: the K and V tiles, scores/probabilities, P·V, alpha and a mask tile,
// plus one (step, block) in flight: its Q rows and running state. A ring adds one IPCQ
// entry of staging each way (the popped entry on its way to a receive buffer, the next
// entry to forward); the receive buffers and the spilled state live in the PE's memory.
int64_t PrefillKernel::sram_bytes() const {
  const int64_t r = rows();
  const int64_t slot = 2 * tile_ * d_ * esize() + r * tile_ * 4 + r * d_ * 4 + r * 4 + qb_ * tile_ * 4;
  const int64_t pair = group_ * qb_ * d_ * esize() + group_ * qb_ * (d_ + 2) * 4;
  return cfg_.kernel.prefetch * (slot + pair) + (n_ > 1 ? 2 * cfg_.hw.ipcq.entry_bytes : 0);
}

int64_t PrefillKernel::block_entries(int rank) const {
  const int64_t bytes = 2 * block_len(rank) * d_ * esize(), entry = cfg_.hw.ipcq.entry_bytes;
  return (bytes + entry - 1) / entry;
}

// A padded row past the block's last query stands in for that query (its rows are never stored).
int64_t PrefillKernel::query_pos(int64_t block, int64_t i) const {
  return query_global(in_, rank_, block * qb_ + std::min(i, q_valid(block) - 1));
}

Status PrefillKernel::start() {
  if (shard_.q_len != q_len_ || shard_.kv_len != block_len(rank_)) {
    return internal_error("ahbm: head ", job_.head, " rank ", rank_, ": the geometry gives ", q_len_, " queries and ",
                          block_len(rank_), " keys, but ", shard_.q_len, " and ", shard_.kv_len, " were placed there");
  }
  pe_.sram_used = sram_bytes();
  if (pe_.sram_used > cfg_.hw.sram_bytes) {
    return capacity("ahbm: the prefill kernel needs ", pe_.sram_used, " bytes of SRAM per PE (tile ", tile_, ", q_block ",
                    qb_, ", prefetch ", cfg_.kernel.prefetch, "), pe.sram_bytes is ", cfg_.hw.sram_bytes);
  }
  const int prefetch = cfg_.kernel.prefetch;
  buf_.resize(static_cast<size_t>(prefetch));
  pairs_.resize(static_cast<size_t>(prefetch));
  for (int i = prefetch - 1; i >= 0; --i) {
    free_slots_.push_back(i);
    free_pairs_.push_back(i);
  }
  if (job_.values) {
    for (TileBuffers& b : buf_) b.resize(tile_, rows(), d_);
    for (PairSlot& p : pairs_) p.q.resize(static_cast<size_t>(group_ * qb_ * d_));
    if (n_ > 1) spilled_.assign(static_cast<size_t>(n_blocks_), FlashState(group_ * qb_, d_));
  }
  step_planned_.assign(static_cast<size_t>(n_), 0);
  step_done_.assign(static_cast<size_t>(n_), 0);
  ready_.assign(static_cast<size_t>(n_), false);
  ready_[0] = true;  // step 0 is the PE's own block
  forwarded_.assign(static_cast<size_t>(n_), false);
  forwarded_[static_cast<size_t>(n_ - 1)] = true;  // the last step's block goes no further
  released_.assign(static_cast<size_t>(n_), false);
  step_buf_.assign(static_cast<size_t>(n_), -1);
  plan();
  pair_slot_.assign(static_cast<size_t>(n_ * n_blocks_), -1);
  pair_left_.assign(static_cast<size_t>(n_ * n_blocks_), 0);
  for (const Item& it : plan_) ++pair_left_[static_cast<size_t>(pair(it))];
  chip_.engine().after(0, [this] { progress(); });
  return {};
}

// The kernel's `if`s (ADR §5.1, §7): position comparisons between each query block and
// each KV tile of each step's block, decided before anything is enqueued.
void PrefillKernel::plan() {
  for (int s = 0; s < n_; ++s) {
    const int src = source(s);
    const int64_t len = block_len(src), n_tiles = (len + tile_ - 1) / tile_;
    for (int64_t b = 0; b < n_blocks_; ++b) {
      const int64_t q_lo = query_pos(b, 0), q_hi = query_pos(b, q_valid(b) - 1);
      for (int64_t h = 0; h < streams(); ++h) {
        const size_t first = plan_.size();
        for (int64_t t = 0; t < n_tiles; ++t) {
          const int64_t valid = std::min(tile_, len - t * tile_);
          const int64_t k_lo = key_global(in_, src, t * tile_), k_hi = key_global(in_, src, t * tile_ + valid - 1);
          if (k_lo > q_hi) {  // tile_all_future: not enqueued
            ++stats_.tiles_skipped;
            continue;
          }
          plan_.push_back({.step = s, .block = b, .head = h, .tile = t, .masked = k_hi > q_lo || valid < tile_});
          stats_.mask_tiles += plan_.back().masked ? 1 : 0;
        }
        if (plan_.size() == first) continue;
        plan_[first].opens = true;
        plan_.back().closes = true;
        step_planned_[static_cast<size_t>(s)] += static_cast<int64_t>(plan_.size() - first);
      }
    }
  }
  // A stream's first run starts from the empty state; its last one stores O.
  std::vector<int> first_step(static_cast<size_t>(n_blocks_ * streams()), n_), last_step(first_step.size(), -1);
  for (const Item& it : plan_) {
    const size_t stream = static_cast<size_t>(it.block * streams() + it.head);
    first_step[stream] = std::min(first_step[stream], it.step);
    last_step[stream] = std::max(last_step[stream], it.step);
  }
  for (Item& it : plan_) {
    const size_t stream = static_cast<size_t>(it.block * streams() + it.head);
    it.fresh = it.opens && it.step == first_step[stream];
    it.final = it.closes && it.step == last_step[stream];
  }
  stats_.tiles = static_cast<int64_t>(plan_.size());
  stats_.steps = n_;
  for (int64_t planned : step_planned_) stats_.steps_skipped += planned == 0 ? 1 : 0;
}

// Everything the kernel does is a reaction to an event; this is the loop body of §5.1/§5.5.
void PrefillKernel::progress() {
  issue_more();
  release_buffers();
  start_forward();
  maybe_poll();
  maybe_finish();
}

// Keeps the prefetch window full while the next composite's block is here.
void PrefillKernel::issue_more() {
  while (next_ < plan_.size() && !free_slots_.empty()) {
    const Item& it = plan_[next_];
    if (!ready_[static_cast<size_t>(it.step)]) return;
    int& ps = pair_slot_[static_cast<size_t>(pair(it))];
    if (ps < 0) {
      if (free_pairs_.empty()) {
        chip_.engine().fail(internal_error("ahbm: head ", job_.head, " rank ", rank_, ": no free Q/state slot"));
        return;
      }
      ps = free_pairs_.back();
      free_pairs_.pop_back();
      if (job_.values) pairs_[static_cast<size_t>(ps)].state = FlashState(group_ * qb_, d_);
    }
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    const size_t k = next_++;
    chip_.scalar(pe_, cfg_.hw.issue_cycles, [this, k, slot] {
      Status s = job_.queue[static_cast<size_t>(rank_)]->submit(build(k, slot), [this, k, slot] { on_composite_done(k, slot); });
      if (!s) chip_.engine().fail(s.take_error());
    });
  }
}

// mask [q_block, tile]: 0 where key x of the tile is at or before query i, else -inf.
void PrefillKernel::build_mask(const Item& it, int64_t valid, std::vector<float>& mask) const {
  const int src = source(it.step);
  mask.assign(static_cast<size_t>(qb_ * tile_), kNegInf);
  for (int64_t i = 0; i < qb_; ++i) {
    const int64_t q = query_pos(it.block, i);
    for (int64_t x = 0; x < valid; ++x)
      if (key_global(in_, src, it.tile * tile_ + x) <= q) mask[static_cast<size_t>(i * tile_ + x)] = 0.0f;
  }
}

const float* PrefillKernel::block_k(int step) const {
  return step == 0 ? shard_.k.data() : rbufs_[static_cast<size_t>(step_buf_[static_cast<size_t>(step)])].k.data();
}

const float* PrefillKernel::block_v(int step) const {
  return step == 0 ? shard_.v.data() : rbufs_[static_cast<size_t>(step_buf_[static_cast<size_t>(step)])].v.data();
}

Composite PrefillKernel::build(size_t k, int slot) {
  const Item it = plan_[k];
  const bool values = job_.values;
  TileBuffers& b = buf_[static_cast<size_t>(slot)];
  PairSlot& ps = pairs_[static_cast<size_t>(pair_slot_[static_cast<size_t>(pair(it))])];
  const int64_t r = rows(), row0 = it.head * qb_, qv = q_valid(it.block);  // head is 0 with GQA batching
  const int64_t valid = std::min(tile_, block_len(source(it.step)) - it.tile * tile_);
  const int64_t kv_bytes = valid * d_ * esize(), state_bytes = r * (d_ + 2) * 4;
  const int64_t heads = cfg_.kernel.gqa_batch ? group_ : 1, head0 = cfg_.kernel.gqa_batch ? 0 : it.head;
  const int stream = static_cast<int>(it.block * streams() + it.head);
  stats_.dma_k_bytes += kv_bytes;
  stats_.dma_v_bytes += kv_bytes;
  if (it.masked && values) build_mask(it, valid, b.mask);

  std::optional<Stage> q_load, state_load;
  if (it.opens) {  // load_Q(q_block) of ADR §5.1: this run's heads, the block's valid rows
    const int64_t bytes = heads * qv * d_ * esize();
    stats_.dma_q_bytes += bytes;
    q_load = Stage{.op = StageOp::kDma, .name = "dma_q", .bytes = bytes};
    if (values) {
      q_load->compute = [this, &ps, heads, head0, qv, block = it.block] {
        for (int64_t h = head0; h < head0 + heads; ++h) {
          float* dst = ps.q.data() + h * qb_ * d_;
          load_rows(shard_.q.data() + (h * in_.q_cap + block * qb_) * d_, qv, qb_, d_, dst);
        }
      };
    }
  }
  if (it.opens && !it.fresh) {  // the state this block left in memory after the previous step
    stats_.dma_state_bytes += state_bytes;
    state_load = Stage{.op = StageOp::kDma, .name = "dma_state", .bytes = state_bytes, .carried = true};
    if (values) state_load->compute = [this, &ps, row0, r, block = it.block] { copy_rows(spilled_[static_cast<size_t>(block)], ps.state, row0, r); };
  }
  Composite c = attn_tile(
      {.name = str_cat("attn_tile[h", job_.head, ",pe", rank_, ",s", it.step, ",q", it.block, ",g", it.head, ",t", it.tile, "]"),
       .stream = stream,
       .rows = r,
       .tile = tile_,
       .head_dim = d_,
       .scale = scale_,
       .storage = in_.storage,
       .q = values ? ps.q.data() + row0 * d_ : nullptr,
       .k = values ? block_k(it.step) + it.tile * tile_ * d_ : nullptr,
       .v = values ? block_v(it.step) + it.tile * tile_ * d_ : nullptr,
       .valid = valid,
       .mask_rows = it.masked ? qb_ : 0,
       .state = &ps.state,
       .row0 = row0,
       .values = values,
       .carry_qk = true},
      b, std::move(q_load), std::move(state_load));
  if (!it.closes) return c;
  const int update = static_cast<int>(c.stages.size()) - 1;
  if (!it.final) {  // spill the running state until this block's next step
    stats_.dma_state_bytes += state_bytes;
    c.stages.push_back({.op = StageOp::kDma, .name = "dma_state", .bytes = state_bytes, .deps = {update}});
    if (values) c.stages.back().compute = [this, &ps, row0, r, block = it.block] { copy_rows(ps.state, spilled_[static_cast<size_t>(block)], row0, r); };
    return c;
  }
  // O = O / l for the block's rows, then the store of its valid rows (ADR §5.4 store O[q_block]).
  const int norm = static_cast<int>(c.stages.size());
  c.stages.push_back({.op = StageOp::kVec, .name = "vec_normalize", .elems = r * d_ + r, .deps = {update}});
  const int64_t bytes = heads * qv * d_ * esize();
  stats_.dma_o_bytes += bytes;
  c.stages.push_back({.op = StageOp::kDma, .name = "dma_o", .bytes = bytes, .deps = {norm}});
  if (values) {
    c.stages.back().compute = [this, &ps, heads, head0, qv, block = it.block] {
      for (int64_t h = head0; h < head0 + heads; ++h) {
        for (int64_t i = 0; i < qv; ++i) {
          const int64_t at = query_global(in_, rank_, block * qb_ + i) - in_.q_start;
          normalize_row(ps.state, h * qb_ + i, job_.out.data() + (h * in_.q_len + at) * d_);
        }
      }
    };
  }
  return c;
}

void PrefillKernel::on_composite_done(size_t k, int slot) {
  const Item& it = plan_[k];
  free_slots_.push_back(slot);
  ++stats_.composites;
  ++step_done_[static_cast<size_t>(it.step)];
  int& left = pair_left_[static_cast<size_t>(pair(it))];
  if (--left == 0) free_pairs_.push_back(pair_slot_[static_cast<size_t>(pair(it))]);
  if (next_ == plan_.size() && free_slots_.size() == buf_.size()) stats_.compute_end = chip_.engine().now();
  progress();
}

// A receive buffer is free again once its step has computed and its block has been forwarded.
void PrefillKernel::release_buffers() {
  for (int s = 1; s < n_; ++s) {
    const size_t i = static_cast<size_t>(s);
    if (released_[i] || !ready_[i] || step_done_[i] < step_planned_[i] || !forwarded_[i]) continue;
    released_[i] = true;
    if (step_buf_[i] >= 0) {
      free_rbufs_.push_back(step_buf_[i]);
      --rbufs_in_use_;
    }
  }
}

// Forwards the current step's block to the successor, one IPCQ entry at a time: a DMA read
// of the entry's bytes, then a push that waits for a credit at the successor's queue.
void PrefillKernel::start_forward() {
  while (n_ > 1 && !sending_ && send_step_ < n_ - 1 && ready_[static_cast<size_t>(send_step_)]) {
    if (block_entries(source(send_step_)) == 0) {  // an empty shard: nothing to send
      forwarded_[static_cast<size_t>(send_step_++)] = true;
      continue;
    }
    sending_ = true;
    send_entry();
  }
}

void PrefillKernel::send_entry() {
  const int step = send_step_;
  const int64_t len = block_len(source(step));
  const int64_t per_entry = cfg_.hw.ipcq.entry_bytes / esize(), total = 2 * len * d_;
  const int64_t from = send_entry_ * per_entry, count = std::min(per_entry, total - from);
  stats_.ring_dma_bytes += count * esize();
  chip_.dma(pe_, count * esize(), [this, step, len, from, count] {
    Message m{rank_, count * esize(), {}};
    if (job_.values) {  // the block as [K rows | V rows]; this entry's slice of it
      m.payload.resize(static_cast<size_t>(count));
      for (int64_t e = 0; e < count; ++e) {
        const int64_t x = from + e;
        m.payload[static_cast<size_t>(e)] = x < len * d_ ? block_k(step)[x] : block_v(step)[x - len * d_];
      }
    }
    ++stats_.ring_entries;
    stats_.ring_bytes += m.bytes;
    Pe& succ = *job_.pe[static_cast<size_t>((rank_ + 1) % n_)];
    chip_.push(pe_, succ, std::move(m), [this, step] {
      if (++send_entry_ < block_entries(source(step))) {
        send_entry();
        return;
      }
      forwarded_[static_cast<size_t>(step)] = true;
      ++send_step_;
      send_entry_ = 0;
      sending_ = false;
      progress();
    });
  });
}

// Ping-pong: step t's block may come in once step t - 2 has given its buffer back.
bool PrefillKernel::can_receive() const {
  return recv_step_ < n_ && (recv_step_ < 3 || released_[static_cast<size_t>(recv_step_ - 2)]);
}

void PrefillKernel::maybe_poll() {
  if (n_ == 1 || polling_ || receiving_ || spinning_ || !can_receive()) return;
  if (block_entries(source(recv_step_)) == 0) {  // an empty shard arrives as nothing
    ready_[static_cast<size_t>(recv_step_++)] = true;
    progress();
    return;
  }
  polling_ = true;
  ++stats_.polls;
  chip_.scalar(pe_, cfg_.hw.ipcq.poll_cycles, [this] { on_polled(); });
}

// One look at the predecessor's direction: pop an entry into the receive buffer (a DMA
// write), or on a miss with nothing in flight spin until something arrives (ADR §5.6).
void PrefillKernel::on_polled() {
  polling_ = false;
  Pe& pred = *job_.pe[static_cast<size_t>((rank_ - 1 + n_) % n_)];
  InQueue& q = pe_.inq[static_cast<size_t>(chip_.arrival_dir(pred, pe_))];
  if (q.empty()) {
    if (free_slots_.size() < buf_.size()) return;  // tile work in flight: its completion polls again
    // spin_short() and poll again until an entry is there: the delivery wakes the kernel at
    // the first poll that would have seen it, and the misses before it are counted.
    spinning_ = true;
    spin_from_ = chip_.engine().now();
    q.when_delivered([this] {
      const Cycle period = cfg_.hw.ipcq.spin_cycles + cfg_.hw.ipcq.poll_cycles;
      const int64_t misses = std::max<int64_t>(1, (chip_.engine().now() - spin_from_ + period - 1) / period);
      if (misses > cfg_.hw.ipcq.max_spin_polls) {
        chip_.engine().fail(internal_error("ahbm deadlock at cycle ", chip_.engine().now(), ": ", waiting_on(), " after ",
                                           cfg_.hw.ipcq.max_spin_polls, " empty polls in a row"));
        return;
      }
      stats_.spins += misses;
      stats_.polls += misses;
      stats_.spin_cycles += misses * cfg_.hw.ipcq.spin_cycles;
      if (next_ < plan_.size()) stats_.starved_cycles += misses * period;
      chip_.engine().at(spin_from_ + misses * period, [this] {
        spinning_ = false;
        on_polled();
      });
    });
    return;
  }
  ++stats_.poll_hits;
  const int step = recv_step_;
  if (recv_entry_ == 0) {  // the block's first entry takes a buffer
    if (free_rbufs_.empty()) {
      free_rbufs_.push_back(static_cast<int>(rbufs_.size()));
      rbufs_.emplace_back();
    }
    const int at = free_rbufs_.back();
    free_rbufs_.pop_back();
    step_buf_[static_cast<size_t>(step)] = at;
    stats_.max_recv_buffers = std::max(stats_.max_recv_buffers, ++rbufs_in_use_);
    if (job_.values) {  // rows past this block's length stay NaN, as in the PE's own cache
      RecvBuffer& rb = rbufs_[static_cast<size_t>(at)];
      rb.k.assign(static_cast<size_t>(in_.kv_cap * d_), std::numeric_limits<float>::quiet_NaN());
      rb.v.assign(rb.k.size(), std::numeric_limits<float>::quiet_NaN());
    }
  }
  auto m = std::make_shared<Message>(q.pop());
  receiving_ = true;
  stats_.ring_dma_bytes += m->bytes;
  const int64_t from = recv_entry_ * (cfg_.hw.ipcq.entry_bytes / esize());
  chip_.dma(pe_, m->bytes, [this, m, step, from] {
    if (job_.values) {
      RecvBuffer& rb = rbufs_[static_cast<size_t>(step_buf_[static_cast<size_t>(step)])];
      const int64_t len = block_len(source(step));
      for (size_t e = 0; e < m->payload.size(); ++e) {
        const int64_t x = from + static_cast<int64_t>(e);
        (x < len * d_ ? rb.k[static_cast<size_t>(x)] : rb.v[static_cast<size_t>(x - len * d_)]) = m->payload[e];
      }
    }
    receiving_ = false;
    if (++recv_entry_ == block_entries(source(step))) {
      ready_[static_cast<size_t>(step)] = true;
      ++recv_step_;
      recv_entry_ = 0;
    }
    progress();
  });
}

void PrefillKernel::maybe_finish() {
  if (finished() || next_ < plan_.size() || free_slots_.size() < buf_.size()) return;
  if (n_ > 1 && (send_step_ < n_ - 1 || recv_step_ < n_ || sending_)) return;
  stats_.done_at = chip_.engine().now();
  if (stats_.compute_end < 0) stats_.compute_end = stats_.done_at;
}

std::string PrefillKernel::waiting_on() const {
  return str_cat("head ", job_.head, " rank ", rank_, " on ", pe_.label(), " (", stats_.composites, "/", plan_.size(),
                 " composites done, receiving step ", recv_step_, " entry ", recv_entry_, ", forwarding step ", send_step_,
                 " entry ", send_entry_, ")");
}

}  // namespace kvf::ahbm
