// The discrete-event engine: one clock, a time-ordered event queue, and Units (DMA, MM, VEC,
// links, the scalar core) that serve requests one at a time in arrival order. Events are per
// stage and per transfer, never per element, so a 128k-token decode stays cheap to simulate.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/ahbm/config.h"

namespace kvf::ahbm {

class Engine {
 public:
  Cycle now() const { return now_; }
  // Runs fn at time t (t >= now); events at the same time run in the order they were posted.
  void at(Cycle t, std::function<void()> fn);
  void after(Cycle dt, std::function<void()> fn) { at(now_ + dt, std::move(fn)); }
  // Processes events until none is left or fail() was called; returns that failure.
  Status run();
  // Stops run() with this error (the first one wins).
  void fail(Error e);
  int64_t events() const { return events_; }

 private:
  struct Event {
    Cycle time;
    int64_t seq;
    std::function<void()> fn;
  };
  static bool later(const Event& a, const Event& b) { return a.time != b.time ? a.time > b.time : a.seq > b.seq; }

  std::vector<Event> heap_;
  Cycle now_ = 0;
  int64_t seq_ = 0, events_ = 0;
  std::optional<Error> failure_;
};

// A hardware unit that does one thing at a time. A request occupies it for `occupy` cycles
// (its throughput cost) and completes `latency` cycles later (pipeline/flight time that does
// not block the next request), so a DMA of B bytes alone takes latency + B/bandwidth.
class Unit {
 public:
  Unit(Engine& engine, std::string name) : engine_(&engine), name_(std::move(name)) {}
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;

  // `amount` is what the request moves or computes (bytes, MACs, elements), for the report.
  void request(Cycle occupy, Cycle latency, int64_t amount, std::function<void()> on_done);

  const std::string& name() const { return name_; }
  Cycle busy_cycles() const { return busy_cycles_; }
  int64_t amount() const { return amount_; }
  int64_t requests() const { return requests_; }
  bool idle() const { return !busy_ && waiting_.empty(); }

 private:
  struct Request {
    Cycle occupy, latency;
    std::function<void()> on_done;
  };
  void start(Request r);

  Engine* engine_;
  std::string name_;
  bool busy_ = false;
  std::deque<Request> waiting_;
  Cycle busy_cycles_ = 0;
  int64_t amount_ = 0, requests_ = 0;
};

// Cycles to push `amount` units of work through a unit doing `rate` per cycle (rounded up).
inline Cycle cycles_for(int64_t amount, double rate) {
  if (amount <= 0) return 0;
  const double c = static_cast<double>(amount) / rate;
  const Cycle whole = static_cast<Cycle>(c);
  return whole < c ? whole + 1 : whole;
}

}  // namespace kvf::ahbm
