// The per-PE decode kernel (decode_kernel.h).
#include "exec/ahbm/decode_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvf::ahbm {

PeKernel::PeKernel(Chip& chip, const AhbmConfig& cfg, const DecodeInputs& in, GroupJob& job, int rank,
                   KernelFaults faults)
    : chip_(chip), cfg_(cfg), in_(in), job_(job), rank_(rank), faults_(faults), pe_(*job.pe[static_cast<size_t>(rank)]),
      kv_(in.kv[static_cast<size_t>(job.head)][static_cast<size_t>(rank)]), group_(in.dims.group()),
      d_(in.dims.head_dim), len_(valid_len(in.geom, rank)), n_tiles_((len_ + cfg.kernel.tile - 1) / cfg.kernel.tile),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(in.dims.head_dim)))),
      children_(group_, d_) {
  state_.assign(static_cast<size_t>(streams()), FlashState(rows(), d_));
  for (int c : job.tree.children[static_cast<size_t>(rank)]) pending_children_.insert(c);
}

int64_t PeKernel::esize() const { return element_bytes(in_.storage); }

// Per prefetch slot: K and V tiles, scores/probabilities, P·V, alpha, mask; plus Q, the
// running state, the children's merged partial and one received partial.
int64_t PeKernel::sram_bytes() const {
  const int64_t tile = cfg_.kernel.tile, r = rows();
  const int64_t slot = 2 * tile * d_ * esize() + r * tile * 4 + r * d_ * 4 + r * 4 + tile * 4;
  const int64_t partial = group_ * (d_ + 2) * 4;
  return cfg_.kernel.prefetch * slot + group_ * d_ * esize() + 3 * partial;
}

bool PeKernel::tail_push() const {
  return cfg_.kernel.gqa_batch && is_leaf() && !is_root() && faults_.drop_push_of_rank != rank_;
}

Status PeKernel::start() {
  if (len_ != kv_.len) {
    return internal_error("ahbm: head ", job_.head, " pe_id ", rank_, ": valid_len ", len_, " but ", kv_.len,
                          " tokens were placed there");
  }
  pe_.sram_used = sram_bytes();
  if (pe_.sram_used > cfg_.hw.sram_bytes) {
    return capacity("ahbm: the decode kernel needs ", pe_.sram_used, " bytes of SRAM per PE (tile ", cfg_.kernel.tile,
                    ", prefetch ", cfg_.kernel.prefetch, "), pe.sram_bytes is ", cfg_.hw.sram_bytes);
  }
  buf_.resize(static_cast<size_t>(cfg_.kernel.prefetch));
  for (TileBuffers& b : buf_) b.resize(cfg_.kernel.tile, rows(), d_);
  for (int i = cfg_.kernel.prefetch - 1; i >= 0; --i) free_slots_.push_back(i);
  if (n_tiles_ == 0) {
    chip_.engine().after(0, [this] { on_sweep_done(); });
    return {};
  }
  issue_more();
  return {};
}

// Keeps the prefetch window full: each composite costs the scalar core issue_cycles.
void PeKernel::issue_more() {
  while (next_ < streams() * n_tiles_ && !free_slots_.empty()) {
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    const int64_t k = next_++;
    chip_.scalar(pe_, cfg_.hw.issue_cycles, [this, k, slot] {
      Status s = job_.queue[static_cast<size_t>(rank_)]->submit(build(k, slot), [this, slot] { on_composite_done(slot); });
      if (!s) chip_.engine().fail(s.take_error());
    });
  }
}

// The k-th composite in issue order: stream k / n_tiles, KV tile k % n_tiles (ADR §3).
Composite PeKernel::build(int64_t k, int slot) {
  const int64_t tile = cfg_.kernel.tile, r = rows();
  const int64_t stream = k / n_tiles_, j = k % n_tiles_;
  TileBuffers& b = buf_[static_cast<size_t>(slot)];
  const int64_t valid = std::min(tile, len_ - j * tile);
  const int64_t bytes = valid * d_ * esize();
  ++stats_.tiles;
  stats_.dma_k_bytes += bytes;
  stats_.dma_v_bytes += bytes;
  b.mask.clear();
  if (valid < tile) {  // the ragged last tile: the kernel builds the mask, the composite applies it
    b.mask.assign(static_cast<size_t>(tile), 0.0f);
    for (int64_t t = valid; t < tile; ++t) b.mask[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
    ++stats_.mask_tiles;
  }
  Composite c = attn_tile(
      {.name = str_cat("attn_tile[h", job_.head, ",pe", rank_, ",s", stream, ",t", j, "]"),
       .stream = static_cast<int>(stream),
       .rows = r,
       .tile = tile,
       .head_dim = d_,
       .scale = scale_,
       .storage = in_.storage,
       .q = in_.q.data() + (job_.head * group_ + (cfg_.kernel.gqa_batch ? 0 : stream)) * d_,
       .k = kv_.k.data() + j * tile * d_,
       .v = kv_.v.data() + j * tile * d_,
       .valid = valid,
       .mask_rows = b.mask.empty() ? 0 : 1,
       .state = &state_[static_cast<size_t>(stream)]},
      b);
  if (k == streams() * n_tiles_ - 1) {
    // The sweep ends with the last tile's attention work, not with a tail push behind it:
    // the push is the reduction's first hop and is counted there.
    Stage& last = c.stages.back();
    last.compute = [this, compute = std::move(last.compute)] {
      if (compute) compute();
      stats_.sweep_end = chip_.engine().now();
    };
  }
  if (tail_push() && k == streams() * n_tiles_ - 1) {
    tail_pushed_ = true;
    Pe* parent = job_.pe[static_cast<size_t>(job_.tree.parent[static_cast<size_t>(rank_)])];
    c.stages.push_back({.op = StageOp::kPush, .name = "push", .deps = {static_cast<int>(c.stages.size()) - 1},
                        .push_to = parent, .message = [this] { return partial(state_[0]); }});
  }
  return c;
}

void PeKernel::on_composite_done(int slot) {
  free_slots_.push_back(slot);
  ++stats_.composites;
  if (++done_ == streams() * n_tiles_) {
    on_sweep_done();
    return;
  }
  issue_more();
  // try_drain_reduction (ADR §5.1): a cheap look at the children while tiles are in flight.
  if (!pending_children_.empty() && !polling_) poll(false);
}

void PeKernel::poll(bool after_sweep) {
  polling_ = true;
  ++stats_.polls;
  chip_.scalar(pe_, cfg_.hw.ipcq.poll_cycles, [this, after_sweep] { on_polled(after_sweep); });
}

// One pass over the pending children's directions, popping whatever has arrived.
void PeKernel::on_polled(bool after_sweep) {
  polling_ = false;
  bool hit = false;
  std::set<Dir> dirs;
  for (int c : pending_children_) dirs.insert(chip_.arrival_dir(*job_.pe[static_cast<size_t>(c)], pe_));
  for (Dir d : dirs) {
    InQueue& q = pe_.inq[static_cast<size_t>(d)];
    while (!q.empty()) {
      auto m = std::make_shared<Message>(q.pop());
      pending_children_.erase(m->from);
      hit = true;
      ++merges_;
      chip_.vec(pe_, 3 * group_ * d_ + 4 * group_, 2 * group_, [this, m] {
        FlashState part(group_, d_);
        part.unpack(m->payload);
        merge_into(children_, part);
        --merges_;
        if (sweep_done_) drain();
      });
    }
  }
  if (hit) {
    ++stats_.poll_hits;
    misses_in_a_row_ = 0;
  }
  if (!after_sweep || hit) return;
  // A miss with no tile left to issue: spin_short(), then poll again (ADR §5.6).
  if (++misses_in_a_row_ > cfg_.hw.ipcq.max_spin_polls) {
    chip_.engine().fail(internal_error("ahbm deadlock at cycle ", chip_.engine().now(), ": ", waiting_on(), " after ",
                                       cfg_.hw.ipcq.max_spin_polls, " empty polls in a row"));
    return;
  }
  ++stats_.spins;
  stats_.spin_cycles += cfg_.hw.ipcq.spin_cycles;
  polling_ = true;
  chip_.engine().after(cfg_.hw.ipcq.spin_cycles, [this] { poll(true); });
}

void PeKernel::on_sweep_done() {
  sweep_done_ = true;
  drain();
}

// After the sweep: poll until every child has been merged, then reduce and pass on.
void PeKernel::drain() {
  if (reduced_) return;
  if (pending_children_.empty()) {
    if (merges_ == 0) finish_reduction();
    return;
  }
  if (!polling_) poll(true);
}

FlashState PeKernel::own_state() const {
  if (cfg_.kernel.gqa_batch) return state_[0];
  FlashState s(group_, d_);
  for (int64_t g = 0; g < group_; ++g) {
    const FlashState& row = state_[static_cast<size_t>(g)];
    s.m[static_cast<size_t>(g)] = row.m[0];
    s.l[static_cast<size_t>(g)] = row.l[0];
    std::copy(row.o.begin(), row.o.end(), s.o.begin() + g * d_);
  }
  return s;
}

Message PeKernel::partial(const FlashState& s) const { return Message{rank_, s.payload_bytes(), s.pack()}; }

void PeKernel::finish_reduction() {
  reduced_ = true;
  auto acc = std::make_shared<FlashState>(own_state());
  auto pass_on = [this, acc] {
    if (is_root()) {
      chip_.vec(pe_, group_ * d_ + group_, 0, [this, acc] {
        normalize(*acc, job_.out.data());
        const int64_t bytes = group_ * d_ * esize();
        stats_.dma_o_bytes += bytes;
        chip_.dma(pe_, bytes, [this] { finish(); });
      });
    } else if (tail_pushed_ || faults_.drop_push_of_rank == rank_) {
      finish();
    } else {
      Pe& parent = *job_.pe[static_cast<size_t>(job_.tree.parent[static_cast<size_t>(rank_)])];
      chip_.push(pe_, parent, partial(*acc), [this] { finish(); });
    }
  };
  if (job_.tree.children[static_cast<size_t>(rank_)].empty()) {
    pass_on();
    return;
  }
  chip_.vec(pe_, 3 * group_ * d_ + 4 * group_, 2 * group_, [this, acc, pass_on] {
    merge_into(*acc, children_);
    pass_on();
  });
}

void PeKernel::finish() {
  stats_.done_at = chip_.engine().now();
  if (is_root()) job_.done_at = stats_.done_at;
}

std::string PeKernel::waiting_on() const {
  std::string children;
  for (int c : pending_children_) children += str_cat(children.empty() ? "" : ",", c);
  return str_cat("head ", job_.head, " pe_id ", rank_, " on ", pe_.label(), " (", done_, "/", streams() * n_tiles_,
                 " tiles done", children.empty() ? "" : ", waiting for children " + children, ")");
}

}  // namespace kvf::ahbm
