// The chip's PEs, units and IPCQ transfers (chip.h).
#include "exec/ahbm/chip.h"

#include <algorithm>
#include <cstdlib>

namespace kvf::ahbm {

Pe::Pe(Engine& e, int cube_, int index_, int row_, int col_, int queue_depth)
    : cube(cube_), index(index_), row(row_), col(col_), dma(e, "dma"), mm(e, "mm"), vec(e, "vec"), ctl(e, "ctl"),
      inq{InQueue(queue_depth), InQueue(queue_depth), InQueue(queue_depth), InQueue(queue_depth)} {
  for (Dir d : kDirs) link[static_cast<size_t>(d)] = std::make_unique<Unit>(e, std::string("link_") + dir_name(d));
}

std::string Pe::label() const { return str_cat("cube ", cube, " pe ", index, " (", row, ",", col, ")"); }

Chip::Chip(Engine& engine, const HwConfig& hw) : engine_(&engine), hw_(hw) {
  for (int c = 0; c < hw.cubes; ++c)
    for (int r = 0; r < hw.mesh_rows; ++r)
      for (int k = 0; k < hw.mesh_cols; ++k)
        pes_.push_back(std::make_unique<Pe>(engine, c, r * hw.mesh_cols + k, r, k, hw.ipcq.depth));
}

Pe* Chip::neighbour(const Pe& p, Dir d) {
  int r = p.row, c = p.col;
  switch (d) {
    case Dir::kNorth: --r; break;
    case Dir::kSouth: ++r; break;
    case Dir::kEast: ++c; break;
    case Dir::kWest: --c; break;
  }
  if (r < 0 || c < 0 || r >= hw_.mesh_rows || c >= hw_.mesh_cols) return nullptr;
  return &pe_at(p.cube, r, c);
}

int Chip::hops(const Pe& a, const Pe& b) const { return std::abs(a.row - b.row) + std::abs(a.col - b.col); }

void Chip::dma(Pe& p, int64_t bytes, std::function<void()> on_done) {
  p.dma.request(cycles_for(bytes, hw_.dma_bytes_per_cycle()), hw_.dma.latency_cycles, bytes, std::move(on_done));
}

void Chip::matmul(Pe& p, int64_t macs, std::function<void()> on_done) {
  p.mm.request(cycles_for(macs, static_cast<double>(hw_.mm.bf16_macs_per_cycle)), hw_.mm.latency_cycles, macs,
               std::move(on_done));
}

void Chip::vec(Pe& p, int64_t elems, int64_t exps, std::function<void()> on_done) {
  const Cycle c = cycles_for(elems, static_cast<double>(hw_.vec.lanes)) +
                  cycles_for(exps, static_cast<double>(hw_.vec.exp_per_cycle));
  p.vec.request(c, 0, elems + exps, std::move(on_done));
}

void Chip::scalar(Pe& p, Cycle cycles, std::function<void()> on_done) { p.ctl.request(cycles, 0, 0, std::move(on_done)); }

// Columns first, then rows: deterministic, deadlock-free on a mesh.
std::vector<std::pair<Pe*, Dir>> Chip::xy_route(Pe& src, const Pe& dst) {
  std::vector<std::pair<Pe*, Dir>> route;
  Pe* at = &src;
  while (at->col != dst.col || at->row != dst.row) {
    Dir d = at->col < dst.col ? Dir::kEast : at->col > dst.col ? Dir::kWest : at->row < dst.row ? Dir::kSouth : Dir::kNorth;
    route.emplace_back(at, d);
    at = neighbour(*at, d);
  }
  return route;
}

Dir Chip::arrival_dir(const Pe& src, const Pe& dst) const {
  // The last XY hop moves along the row axis unless the PEs share a row.
  if (src.row != dst.row) return dst.row > src.row ? Dir::kNorth : Dir::kSouth;
  return dst.col > src.col ? Dir::kWest : Dir::kEast;
}

void Chip::send_hops(std::shared_ptr<std::vector<std::pair<Pe*, Dir>>> route, size_t hop, int64_t bytes,
                     std::function<void()> arrive) {
  if (hop == route->size()) {
    arrive();
    return;
  }
  auto [pe, d] = (*route)[hop];
  pe->link[static_cast<size_t>(d)]->request(
      cycles_for(bytes, static_cast<double>(hw_.ipcq.bytes_per_cycle)), hw_.ipcq.hop_latency_cycles, bytes,
      [this, route, hop, bytes, arrive = std::move(arrive)]() mutable { send_hops(route, hop + 1, bytes, std::move(arrive)); });
}

void Chip::push(Pe& src, Pe& dst, Message m, std::function<void()> on_delivered) {
  if (&src == &dst || src.cube != dst.cube) {
    engine_->fail(internal_error("ahbm: push from ", src.label(), " to ", dst.label(), ": not a path inside one cube"));
    return;
  }
  if (m.bytes > hw_.ipcq.entry_bytes) {
    engine_->fail(capacity("ahbm: IPCQ message of ", m.bytes, " bytes exceeds pe.ipcq.entry_bytes ", hw_.ipcq.entry_bytes));
    return;
  }
  auto route = std::make_shared<std::vector<std::pair<Pe*, Dir>>>(xy_route(src, dst));
  InQueue& q = dst.inq[static_cast<size_t>(arrival_dir(src, dst))];
  const int n_hops = static_cast<int>(route->size());
  ++traffic_.messages;
  traffic_.bytes += m.bytes;
  traffic_.link_bytes += m.bytes * n_hops;
  traffic_.max_hops = std::max(traffic_.max_hops, n_hops);

  struct Send {
    Message m;
    std::function<void()> on_delivered;
    Cycle blocked_at = -1;
  };
  auto s = std::make_shared<Send>(Send{std::move(m), std::move(on_delivered)});
  // The retry closure refers to itself weakly; while blocked, the queue's waiting list owns it.
  auto attempt = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak = attempt;
  *attempt = [this, s, route, &q, weak]() {
    if (!q.reserve()) {
      if (s->blocked_at < 0) s->blocked_at = engine_->now();
      q.wait_for_credit([self = weak.lock()] { (*self)(); });
      return;
    }
    if (s->blocked_at >= 0) traffic_.stall_cycles += engine_->now() - s->blocked_at;
    send_hops(route, 0, s->m.bytes, [s, &q] {
      q.deliver(std::move(s->m));
      s->on_delivered();
    });
  };
  (*attempt)();
}

Status Chip::check_no_blocked_senders() const {
  for (const auto& p : pes_) {
    for (Dir d : kDirs) {
      const InQueue& q = p->inq[static_cast<size_t>(d)];
      if (q.blocked_senders() > 0) {
        return internal_error("ahbm deadlock at cycle ", engine_->now(), ": ", q.blocked_senders(),
                              " sender(s) wait on the full ", dir_name(d), " queue of ", p->label(), " (", q.size(),
                              " entries) and nothing is left to pop it");
      }
    }
  }
  return {};
}

}  // namespace kvf::ahbm
