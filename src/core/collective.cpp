// ThreadGroup: the all-reduce between threads of one process, in two barriers per call.
#include "core/collective.h"

#include <condition_variable>
#include <mutex>
#include <type_traits>

namespace kvf {

struct ThreadGroup::Shared {
  struct Post {
    void* data = nullptr;
    size_t count = 0;
    bool f64 = false;
  };
  explicit Shared(int n) : posts(static_cast<size_t>(n)) {}

  // A barrier that a rank's abort breaks. std::barrier's arrive_and_drop should do it, but
  // under libstdc++ 12 the ranks left waiting after a drop hung in ThreadGroup's abort test;
  // a mutex and a condition variable say plainly when they wake. False: a rank left the
  // group, now or before.
  bool arrive_and_wait() {
    std::unique_lock lock(mutex);
    if (left >= 0) return false;
    const uint64_t phase = phases;
    if (++arrived == static_cast<int>(posts.size())) {
      arrived = 0;
      ++phases;
      woken.notify_all();
      return true;
    }
    woken.wait(lock, [&] { return phases != phase || left >= 0; });
    return phases != phase;
  }
  void leave(int rank) {
    std::lock_guard lock(mutex);
    if (left < 0) left = rank;
    woken.notify_all();
  }
  int left_by() {
    std::lock_guard lock(mutex);
    return left;
  }

  std::vector<Post> posts;  // each rank's buffer of the call in progress
  std::mutex mutex;
  std::condition_variable woken;
  int arrived = 0;      // ranks waiting in this phase
  uint64_t phases = 0;  // phases completed
  int left = -1;        // the first rank that aborted
};

namespace {

Error left_group(int rank) { return internal_error("collective: rank ", rank, " left the group"); }

// Every rank's post of this call has the same count and element type.
Status agree(const ThreadGroup::Shared& s, int rank) {
  const ThreadGroup::Shared::Post& mine = s.posts[static_cast<size_t>(rank)];
  for (size_t r = 0; r < s.posts.size(); ++r) {
    if (s.posts[r].count != mine.count || s.posts[r].f64 != mine.f64) {
      return internal_error("collective: rank ", r, " all-reduces ", s.posts[r].count, s.posts[r].f64 ? " f64" : " f32",
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

class ThreadRank final : public Collective {
 public:
  ThreadRank(std::unique_ptr<ThreadGroup::Shared>& shared, int rank, int size)
      : shared_(shared), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status all_reduce_sum(std::span<float> data) override { return reduce(data); }
  Status all_reduce_sum(std::span<double> data) override { return reduce(data); }
  void abort() override { shared_->leave(rank_); }

 private:
  template <class T>
  Status reduce(std::span<T> data) {
    ThreadGroup::Shared& s = *shared_;
    if (s.left_by() >= 0) return left_group(s.left_by());
    s.posts[static_cast<size_t>(rank_)] = {data.data(), data.size(), std::is_same_v<T, double>};
    if (!s.arrive_and_wait()) return left_group(s.left_by());
    Status agreed = agree(s, rank_);
    if (agreed) sum_share<T>(s, rank_);
    // No rank posts its next call before every share is written. Every rank is inside this
    // call, so none can have left: this phase completes.
    const bool ended = s.arrive_and_wait();
    if (!agreed || ended) return agreed;
    return left_group(s.left_by());
  }

  std::unique_ptr<ThreadGroup::Shared>& shared_;  // the group's, replaced by restart()
  int rank_, size_;
};

}  // namespace

ThreadGroup::ThreadGroup(int size) : shared_(std::make_unique<Shared>(size)) {
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<ThreadRank>(shared_, r, size));
}

ThreadGroup::~ThreadGroup() = default;

int ThreadGroup::aborted_by() const { return shared_->left_by(); }

void ThreadGroup::restart() { shared_ = std::make_unique<Shared>(size()); }

}  // namespace kvf
