// The chip: CUBEs, each a 2-D mesh of PEs with a DMA engine, an MM unit, a VEC unit, a
// scalar core (ctl) that runs the kernel, and four IPCQ queue pairs. The IO die is not
// modelled as a unit: the attention kernel's inputs are already in the cubes' memory.
// Stage durations follow from HwConfig here and nowhere else.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "exec/ahbm/engine.h"
#include "exec/ahbm/ipcq.h"

namespace kvf::ahbm {

struct Pe {
  Pe(Engine& e, int cube, int index, int row, int col, int queue_depth);
  int cube, index, row, col;
  Unit dma, mm, vec, ctl;
  std::array<std::unique_ptr<Unit>, 4> link;  // outbound link per direction (Dir order)
  std::array<InQueue, 4> inq;                 // inbound queue from the neighbour in each direction
  int64_t sram_used = 0;                      // bytes the kernel placed in SRAM

  std::string label() const;  // "cube 0 pe 3 (0,3)"
};

struct IpcqTraffic {
  int64_t messages = 0;
  int64_t bytes = 0;       // payload bytes sent
  int64_t link_bytes = 0;  // payload bytes times hops
  int max_hops = 0;
  Cycle stall_cycles = 0;  // senders waiting for a credit (back-pressure)
};

class Chip {
 public:
  Chip(Engine& engine, const HwConfig& hw);

  Engine& engine() { return *engine_; }
  const HwConfig& hw() const { return hw_; }
  Pe& pe(int cube, int index) { return *pes_[static_cast<size_t>(cube * hw_.pes_per_cube() + index)]; }
  Pe& pe_at(int cube, int row, int col) { return pe(cube, row * hw_.mesh_cols + col); }
  const std::vector<std::unique_ptr<Pe>>& pes() const { return pes_; }
  Pe* neighbour(const Pe& p, Dir d);
  int hops(const Pe& a, const Pe& b) const;  // Manhattan distance inside one cube

  // Units, with durations from the config; on_done runs when the result is available.
  void dma(Pe& p, int64_t bytes, std::function<void()> on_done);
  void matmul(Pe& p, int64_t macs, std::function<void()> on_done);
  void vec(Pe& p, int64_t elems, int64_t exps, std::function<void()> on_done);
  void scalar(Pe& p, Cycle cycles, std::function<void()> on_done);

  // Sends m from src to dst (same cube) along the XY route, one store-and-forward hop per
  // link. It first takes a credit at dst's inbound queue and waits while that queue is full.
  // on_delivered runs when m sits in the queue. The queue is dst.inq[arrival_dir(src, dst)].
  void push(Pe& src, Pe& dst, Message m, std::function<void()> on_delivered);
  Dir arrival_dir(const Pe& src, const Pe& dst) const;

  // After the engine drained: a typed error naming every sender still waiting on a full
  // queue (nothing is left that could pop it).
  Status check_no_blocked_senders() const;
  const IpcqTraffic& traffic() const { return traffic_; }

 private:
  std::vector<std::pair<Pe*, Dir>> xy_route(Pe& src, const Pe& dst);
  void send_hops(std::shared_ptr<std::vector<std::pair<Pe*, Dir>>> route, size_t hop, int64_t bytes,
                 std::function<void()> arrive);

  Engine* engine_;
  HwConfig hw_;
  std::vector<std::unique_ptr<Pe>> pes_;
  IpcqTraffic traffic_;
};

}  // namespace kvf::ahbm
