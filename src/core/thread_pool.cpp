// ThreadPool: chunks are claimed under one mutex; cheap enough for the coarse loops here.
#include "core/thread_pool.h"

#include <algorithm>

namespace kvf {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (fn_ && next_ < n_) {
    const int64_t begin = next_;
    const int64_t end = std::min(n_, begin + chunk_);
    next_ = end;
    const auto* fn = fn_;
    lock.unlock();
    (*fn)(begin, end);
    lock.lock();
    pending_ -= end - begin;
    if (pending_ == 0) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (busy_ || workers_.empty() || n <= grain) {  // nested, single-threaded or tiny: inline
      lock.unlock();
      fn(0, n);
      return;
    }
    busy_ = true;
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    pending_ = n;
    chunk_ = std::max(grain, (n + 4 * size() - 1) / (4 * size()));
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
  busy_ = false;
}

}  // namespace kvf
