// Collectives over a group of ranks (tensor parallelism: docs/models.md), and ThreadGroup, a
// group of ranks that are threads of this process. The oracle and the executors run the IR's
// all_reduce through a Collective; a group across GPUs would implement the same interface.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"

namespace kvf {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Replaces `data` on every rank with the elementwise sum over the ranks, added in rank
  // order in f64 and rounded once to the element type, so every rank gets the same bits.
  // Every rank must make the same calls in the same order with the same count; a call whose
  // counts or types disagree fails on every rank (kInternal) and changes nothing.
  virtual Status all_reduce_sum(std::span<float> data) = 0;
  virtual Status all_reduce_sum(std::span<double> data) = 0;
  // Every rank's `mine` (the same count on every rank) into `all` [size() x count] in rank
  // order, on every rank: context parallelism's partial attentions. A call whose counts
  // disagree fails on every rank (kInternal); an `all` that is not size() x count is refused
  // on its rank before the call (kInternal: that rank then leaves the group, abort()).
  virtual Status all_gather(std::span<const float> mine, std::span<float> all) = 0;
  // Whether the ranks meet in device memory (a group of GPUs): then a GPU executor hands its
  // rows to all_reduce_sum_device, enqueued on its stream, where a group of host ranks needs
  // them copied to the host first.
  virtual bool on_device() const { return false; }
  // The same sum over `count` f32 at `data` in this rank's device memory, enqueued on
  // `stream` (a cudaStream_t). A group of host ranks refuses it (kInternal).
  virtual Status all_reduce_sum_device(float* data, size_t count, void* stream);
  // The same gather in place over this rank's device memory: `all` holds size() x count
  // f32, this rank's own at all + rank() * count; the others' are written beside it,
  // enqueued on `stream`. A group of host ranks refuses it (kInternal).
  virtual Status all_gather_device(float* all, size_t count, void* stream);
  // This rank makes no more calls (its step failed): the other ranks' calls, the one they
  // wait in and every later one, fail (kInternal) instead of waiting for it.
  virtual void abort() = 0;
};

// The error of a call in a group that rank `rank` left (Collective::abort).
Error left_the_group(int rank);

// A group of ranks whose handles the ranks' runners call: ThreadGroup (host threads) or a
// group of GPUs (exec/cuda/step/nccl_group.h).
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int size() const = 0;
  virtual Collective& rank(int r) = 0;
  // The first rank that called abort(), or -1.
  virtual int aborted_by() const = 0;
  // Once no rank is inside a call: a group left by abort() takes calls again.
  virtual Status restart() = 0;
};

// `size` ranks, each driven by its own thread; rank(r) is the handle rank r's thread calls.
// A call waits until every rank has made it (a barrier), then each rank sums its share
// of the elements over every rank's buffer and writes the sums into all of them; a second
// barrier ends the call. No copies, no allocation per call. A barrier spins briefly before
// it sleeps: a decode step meets one every few tens of microseconds.
class ThreadGroup final : public RankGroup {
 public:
  explicit ThreadGroup(int size);  // size >= 1
  ~ThreadGroup() override;
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;

  int size() const override { return static_cast<int>(ranks_.size()); }
  Collective& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  int aborted_by() const override;
  Status restart() override;  // never fails

  // Calls fn(r) for every rank r, each on a thread of its own that lives as long as the
  // group (rank 0 on the caller's), and returns when every call has returned. Not reentrant.
  void run(const std::function<void(int)>& fn);

  struct Shared;   // collective.cpp: the barrier and each rank's posted buffer
  struct Workers;  // collective.cpp: the threads of ranks 1..size-1 and their next job

 private:
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Collective>> ranks_;
  std::unique_ptr<Workers> workers_;  // started by the first run
};

}  // namespace kvf
