// ThreadPool: lock-free chunk claims on a tagged counter; workers spin ~kSpin before sleeping
// on a condition variable, and the caller spins (then yields) until the last chunk is done.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_relax.h"

namespace kvf {
namespace {

// How long an idle worker keeps spinning for the next job before it sleeps. A decode step
// issues a job every ~10-100 us, so within a step workers never sleep; between steps they
// give the core back after this.
constexpr auto kSpin = std::chrono::microseconds(100);
// The caller spins this many pause rounds for the last chunk, then yields the core: on an
// oversubscribed machine the thread it waits for may be descheduled.
constexpr int kCallerSpins = 1 << 14;
// claim_ packs the job's chunk count and the chunks claimed so far in 16 bits each.
constexpr int64_t kMaxChunks = 0xffff;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t tag) {
  for (;;) {
    uint64_t cur = claim_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(cur >> 32) != tag) return;  // that job is over
    // Read after the tagged load: if the claim below succeeds, chunk c of this job was still
    // unclaimed, so the job could not have finished and been replaced: the fields are its own.
    const auto* fn = fn_.load(std::memory_order_relaxed);
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int64_t chunk = chunk_.load(std::memory_order_relaxed);
    const int64_t c = static_cast<int64_t>(cur & 0xffffu);
    if (c >= static_cast<int64_t>((cur >> 16) & 0xffffu)) return;  // all claimed
    if (!claim_.compare_exchange_strong(cur, cur + 1, std::memory_order_acq_rel)) continue;
    const int64_t begin = c * chunk;
    (*fn)(begin, std::min(n, begin + chunk));
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
  }
  // Dekker with parallel_for: we count ourselves as a sleeper before re-reading the
  // generation (seq_cst), the caller bumps the generation before reading the sleepers.
  std::unique_lock<std::mutex> lock(mu_);
  sleepers_.fetch_add(1);
  wake_.wait(lock, [&] { return generation_.load() != seen || stop_.load(); });
  sleepers_.fetch_sub(1);
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(static_cast<uint32_t>(seen));
  }
}

void ThreadPool::wait_until_done() {
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kCallerSpins) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // Nested, concurrent (another caller owns the job slot), single-threaded or tiny: inline.
  if (workers_.empty() || n <= grain || busy_.exchange(true, std::memory_order_acquire)) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balance uneven chunk times; the count must fit claim_.
  const int64_t chunk = std::max({grain, (n + 4 * size() - 1) / (4 * size()), (n + kMaxChunks - 1) / kMaxChunks});
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  fn_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  chunk_.store(chunk, std::memory_order_relaxed);
  pending_.store(n_chunks, std::memory_order_relaxed);
  claim_.store(static_cast<uint64_t>(static_cast<uint32_t>(gen)) << 32 | static_cast<uint64_t>(n_chunks) << 16,
               std::memory_order_release);
  generation_.store(gen);  // seq_cst: see wait_for_job
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }  // a worker between its check and its wait
    wake_.notify_all();
  }
  run_chunks(static_cast<uint32_t>(gen));
  wait_until_done();
  busy_.store(false, std::memory_order_release);
}

}  // namespace kvf
