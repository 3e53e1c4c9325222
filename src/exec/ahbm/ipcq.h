// IPCQ: the PE-to-PE neighbour queues. Each PE has one inbound queue per mesh direction
// (with its outbound link, a queue pair). A sender needs a credit (a free entry) at the
// receiver before it transmits, so a full queue back-pressures the sender; pop frees it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace kvf::ahbm {

enum class Dir : uint8_t { kNorth, kEast, kSouth, kWest };
inline constexpr Dir kDirs[] = {Dir::kNorth, Dir::kEast, Dir::kSouth, Dir::kWest};
const char* dir_name(Dir d);
Dir opposite(Dir d);

// One queue entry: a log-sum-exp partial (m, l, O) of `rows` query rows, from a group rank.
struct Message {
  int from = -1;
  int64_t bytes = 0;
  std::vector<float> payload;  // m [rows], l [rows], O [rows, head_dim]
};

class InQueue {
 public:
  explicit InQueue(int depth = 1) : depth_(depth) {}

  // Takes a credit for one message; false when every entry is taken or promised.
  bool reserve();
  // Called after a failed reserve(): `retry` runs when an entry frees up.
  void wait_for_credit(std::function<void()> retry) { blocked_.push_back(std::move(retry)); }
  void deliver(Message m);
  // A kernel spinning on this queue (ADR §5.6 spin_short) is woken by the next delivery:
  // fn runs once, right after it. The spin's polls are then counted, not simulated one by one.
  void when_delivered(std::function<void()> fn) { on_deliver_ = std::move(fn); }
  bool empty() const { return items_.empty(); }
  // The oldest message; frees its entry and wakes the oldest blocked sender.
  Message pop();

  int size() const { return static_cast<int>(items_.size()); }
  int blocked_senders() const { return static_cast<int>(blocked_.size()); }

 private:
  int depth_;
  int taken_ = 0;  // delivered + in flight
  std::deque<Message> items_;
  std::deque<std::function<void()>> blocked_;
  std::function<void()> on_deliver_;
};

}  // namespace kvf::ahbm
