// ThreadGroup: the all-reduce between threads of one process, in two barriers per call.
#include "core/collective.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>

#include "core/cpu_relax.h"

namespace kvf {
namespace {

// How long a rank spins at a barrier before it sleeps: the ranks of a step arrive within
// microseconds of each other, far sooner than a condition variable wakes a thread.
constexpr auto kSpin = std::chrono::microseconds(50);

}  // namespace

struct ThreadGroup::Shared {
  struct Post {
    void* data = nullptr;
    size_t count = 0;
    bool f64 = false;
  };
  explicit Shared(int n) : posts(static_cast<size_t>(n)) {}

  // A barrier that a rank's abort breaks (std::barrier's arrive_and_drop left the waiting
  // ranks hung under libstdc++ 12). The last rank in bumps the phase; the others spin on it,
  // then sleep. False: a rank left the group, now or before.
  bool arrive_and_wait() {
    if (left.load() >= 0) return false;
    const uint64_t phase = phases.load();
    if (arrived.fetch_add(1) + 1 == static_cast<int>(posts.size())) {
      arrived.store(0);
      phases.store(phase + 1);
      wake_sleepers();
      return true;
    }
    auto passed = [&] { return phases.load() != phase || left.load() >= 0; };
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; !passed(); ++i) {
      cpu_relax();
      if ((i & 63) != 63) continue;
      // More ranks than cores: the rank we wait for may need this one's core.
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() > deadline) {
        // Counted as a sleeper before the last look at the phase (both seq_cst), while the
        // last rank bumps the phase before it counts the sleepers: one of us sees the other.
        std::unique_lock lock(mutex);
        sleepers.fetch_add(1);
        woken.wait(lock, passed);
        sleepers.fetch_sub(1);
        break;
      }
    }
    return phases.load() != phase;
  }
  void leave(int rank) {
    int none = -1;
    left.compare_exchange_strong(none, rank);
    std::lock_guard lock(mutex);
    woken.notify_all();
  }
  void wake_sleepers() {
    if (sleepers.load() == 0) return;
    std::lock_guard lock(mutex);
    woken.notify_all();
  }
  int left_by() const { return left.load(); }

  std::vector<Post> posts;  // each rank's buffer of the call in progress
  std::atomic<int> arrived{0};      // ranks waiting in this phase
  std::atomic<uint64_t> phases{0};  // phases completed
  std::atomic<int> left{-1};        // the first rank that aborted
  std::atomic<int> sleepers{0};     // ranks asleep on `woken`
  std::mutex mutex;
  std::condition_variable woken;
};

// Threads for ranks 1..size-1 that wait for the next job: a step of a tensor-parallel
// group, so once per token, where starting threads would cost more than the step.
struct ThreadGroup::Workers {
  explicit Workers(int size) {
    for (int r = 1; r < size; ++r) threads.emplace_back([this, r] { serve(r); });
  }
  ~Workers() {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    next.notify_all();
    for (std::thread& t : threads) t.join();
  }
  void run(const std::function<void(int)>& fn) {
    {
      std::lock_guard lock(mutex);
      job = &fn;
      ++jobs;
      pending = static_cast<int>(threads.size());
    }
    next.notify_all();
    fn(0);
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
  }
  void serve(int rank) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* fn = nullptr;
      {
        std::unique_lock lock(mutex);
        next.wait(lock, [&] { return stop || jobs != seen; });
        if (stop) return;
        seen = jobs;
        fn = job;
      }
      (*fn)(rank);
      std::lock_guard lock(mutex);
      if (--pending == 0) done.notify_one();
    }
  }

  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable next, done;
  const std::function<void(int)>* job = nullptr;
  uint64_t jobs = 0;  // jobs posted
  int pending = 0;    // workers still in the current job
  bool stop = false;
};

namespace {

// Every rank's post of this call has the same count and element type.
Status agree(const ThreadGroup::Shared& s, int rank) {
  const ThreadGroup::Shared::Post& mine = s.posts[static_cast<size_t>(rank)];
  for (size_t r = 0; r < s.posts.size(); ++r) {
    if (s.posts[r].count != mine.count || s.posts[r].f64 != mine.f64) {
      return internal_error("collective: rank ", r, " posts ", s.posts[r].count, s.posts[r].f64 ? " f64" : " f32",
                            " elements, rank ", rank, " ", mine.count, mine.f64 ? " f64" : " f32");
    }
  }
  return {};
}

// Rank `rank`'s share of the elements: summed over the ranks in rank order, written back to
// every rank's buffer. Only this rank reads or writes these elements during the call.
template <class T>
void sum_share(ThreadGroup::Shared& s, int rank) {
  const size_t n = s.posts[0].count, ranks = s.posts.size();
  const size_t begin = n * static_cast<size_t>(rank) / ranks, end = n * static_cast<size_t>(rank + 1) / ranks;
  for (size_t i = begin; i < end; ++i) {
    double sum = static_cast<T*>(s.posts[0].data)[i];
    for (size_t r = 1; r < ranks; ++r) sum += static_cast<T*>(s.posts[r].data)[i];
    for (size_t r = 0; r < ranks; ++r) static_cast<T*>(s.posts[r].data)[i] = static_cast<T>(sum);
  }
}

}  // namespace

Error left_the_group(int rank) { return internal_error("collective: rank ", rank, " left the group"); }

Status Collective::all_reduce_sum_device(float*, size_t, void*) {
  return internal_error("collective: rank ", rank(), " of ", size(), " sums host memory, not a device's");
}

Status Collective::all_gather_device(float*, size_t, void*) {
  return internal_error("collective: rank ", rank(), " of ", size(), " gathers host memory, not a device's");
}

namespace {

class ThreadRank final : public Collective {
 public:
  ThreadRank(std::unique_ptr<ThreadGroup::Shared>& shared, int rank, int size)
      : shared_(shared), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status all_reduce_sum(std::span<float> data) override { return reduce(data); }
  Status all_reduce_sum(std::span<double> data) override { return reduce(data); }
  Status all_gather(std::span<const float> mine, std::span<float> all) override {
    if (all.size() != mine.size() * static_cast<size_t>(size_)) {
      return internal_error("collective: rank ", rank_, " gathers ", mine.size(), " elements from each of ", size_,
                            " ranks into ", all.size());
    }
    // Posted read-only: every rank copies from every post, none writes one.
    return meet({const_cast<float*>(mine.data()), mine.size(), false}, [&](ThreadGroup::Shared& s) {
      for (size_t r = 0; r < s.posts.size(); ++r) {
        const float* from = static_cast<const float*>(s.posts[r].data);
        std::copy(from, from + mine.size(), all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()));
      }
    });
  }
  void abort() override { shared_->leave(rank_); }

 private:
  template <class T>
  Status reduce(std::span<T> data) {
    return meet({data.data(), data.size(), std::is_same_v<T, double>},
                [&](ThreadGroup::Shared& s) { sum_share<T>(s, rank_); });
  }

  // One call of every rank: this rank posts `mine`; once every rank has, and their posts
  // agree, `work` runs over them; a second barrier ends the call, so no rank posts its next
  // call (or reuses a buffer) before every rank's work is done. Every rank is inside this
  // call then, so none can have left: that phase completes.
  template <class Work>
  Status meet(ThreadGroup::Shared::Post mine, Work&& work) {
    ThreadGroup::Shared& s = *shared_;
    if (s.left_by() >= 0) return left_the_group(s.left_by());
    s.posts[static_cast<size_t>(rank_)] = mine;
    if (!s.arrive_and_wait()) return left_the_group(s.left_by());
    Status agreed = agree(s, rank_);
    if (agreed) work(s);
    const bool ended = s.arrive_and_wait();
    if (!agreed || ended) return agreed;
    return left_the_group(s.left_by());
  }

  std::unique_ptr<ThreadGroup::Shared>& shared_;  // the group's, replaced by restart()
  int rank_, size_;
};

}  // namespace

ThreadGroup::ThreadGroup(int size) : shared_(std::make_unique<Shared>(size)) {
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<ThreadRank>(shared_, r, size));
}

ThreadGroup::~ThreadGroup() = default;

void ThreadGroup::run(const std::function<void(int)>& fn) {
  if (!workers_) workers_ = std::make_unique<Workers>(size());
  workers_->run(fn);
}

int ThreadGroup::aborted_by() const { return shared_->left_by(); }

Status ThreadGroup::restart() {
  shared_ = std::make_unique<Shared>(size());
  return {};
}

}  // namespace kvf
