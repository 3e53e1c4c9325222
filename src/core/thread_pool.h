// A fixed pool of worker threads with a blocking parallel_for. The calling thread works
// too, so a pool of n threads runs n-1 workers. Nested calls run inline (no deadlock).
// Built for many small jobs (~100 per generated token): workers and the caller spin briefly
// on atomics before falling back to sleeping, so a dispatch costs microseconds, not a
// condition-variable round trip.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvf {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n) and returns when all are done.
  // Chunks are at least `grain` long, so tiny loops do not pay for waking threads.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop();
  // Claims and runs chunks of the job tagged `tag` until none are left or the job changed.
  void run_chunks(uint32_t tag);
  // Spins until the generation differs from `seen` (or stop), then sleeps on wake_.
  uint64_t wait_for_job(uint64_t seen);
  void wait_until_done();

  std::vector<std::thread> workers_;

  // The job in flight. Its fields are written by the caller before it publishes generation_
  // (release) and are only used by a thread whose claim on claim_ succeeded for that job's
  // tag, i.e. while the job is still running. They are atomics (relaxed) because a late
  // worker may read them while the next job's caller rewrites them; it then fails its claim.
  std::atomic<const std::function<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, chunk_{1};
  // tag << 32 | chunk count << 16 | chunks claimed, the tag being the generation's low 32
  // bits. A worker still looking at an earlier job fails its claim instead of stealing a
  // chunk of this one (a tag repeats only after 2^32 jobs).
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> pending_{0};  // chunks not yet finished
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> busy_{false};  // a job is in flight: nested or concurrent calls run inline
  std::atomic<bool> stop_{false};

  // Sleeping: workers that spun past their budget wait here for the next generation.
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

}  // namespace kvf
