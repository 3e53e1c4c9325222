// IPCQ credits and directions (ipcq.h).
#include "exec/ahbm/ipcq.h"

#include <utility>

namespace kvf::ahbm {

const char* dir_name(Dir d) {
  switch (d) {
    case Dir::kNorth: return "north";
    case Dir::kEast: return "east";
    case Dir::kSouth: return "south";
    case Dir::kWest: return "west";
  }
  return "?";
}

Dir opposite(Dir d) {
  switch (d) {
    case Dir::kNorth: return Dir::kSouth;
    case Dir::kEast: return Dir::kWest;
    case Dir::kSouth: return Dir::kNorth;
    case Dir::kWest: return Dir::kEast;
  }
  return d;
}

bool InQueue::reserve() {
  if (taken_ >= depth_) return false;
  ++taken_;
  return true;
}

void InQueue::deliver(Message m) {
  items_.push_back(std::move(m));
  if (on_deliver_) std::exchange(on_deliver_, {})();
}

Message InQueue::pop() {
  Message m = std::move(items_.front());
  items_.pop_front();
  --taken_;
  if (!blocked_.empty()) {
    std::function<void()> retry = std::move(blocked_.front());
    blocked_.pop_front();
    retry();
  }
  return m;
}

}  // namespace kvf::ahbm
