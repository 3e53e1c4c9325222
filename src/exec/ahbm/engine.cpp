// The event loop and the FIFO unit (engine.h).
#include "exec/ahbm/engine.h"

#include <algorithm>

namespace kvf::ahbm {

void Engine::at(Cycle t, std::function<void()> fn) {
  heap_.push_back(Event{std::max(t, now_), seq_++, std::move(fn)});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

Status Engine::run() {
  while (!heap_.empty() && !failure_) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    Event e = std::move(heap_.back());
    heap_.pop_back();
    now_ = e.time;
    ++events_;
    e.fn();
  }
  if (failure_) {
    Error e = std::move(*failure_);
    failure_.reset();
    return e;
  }
  return {};
}

void Engine::fail(Error e) {
  if (!failure_) failure_ = std::move(e);
}

void Unit::request(Cycle occupy, Cycle latency, int64_t amount, std::function<void()> on_done) {
  amount_ += amount;
  ++requests_;
  Request r{occupy, latency, std::move(on_done)};
  if (busy_) {
    waiting_.push_back(std::move(r));
    return;
  }
  start(std::move(r));
}

void Unit::start(Request r) {
  busy_ = true;
  busy_cycles_ += r.occupy;
  engine_->after(r.occupy, [this, latency = r.latency, done = std::move(r.on_done)]() mutable {
    // Free the unit first: the next request starts now, while this one's latency runs out.
    busy_ = false;
    if (!waiting_.empty()) {
      Request next = std::move(waiting_.front());
      waiting_.pop_front();
      start(std::move(next));
    }
    if (latency > 0) engine_->after(latency, std::move(done));
    else done();
  });
}

}  // namespace kvf::ahbm
