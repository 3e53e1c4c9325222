// NcclGroup: the GPUs of this process as one group of ranks on NCCL, rank r on GPU r, one
// communicator each (ncclCommInitAll). Rank r's Collective sums and gathers device memory on
// the stream it is given (ncclAllReduce, ncclAllGather: a CUDA graph can capture both), so
// the step executors of the ranks meet without the host. NCCL is loaded at run time (libnccl.so.2):
// kvforge starts on a machine without it, and a group asked for there is refused by name.
// NVLink multicast (NVLS) is switched off before the communicators are made.
// Plain C++: no CUDA or NCCL headers.
#pragma once

#include <memory>
#include <vector>

#include "core/collective.h"
#include "core/error.h"

namespace kvf::exec::cuda::step {

// The NCCL library's version code (e.g. 22809 for 2.28.9); kUnsupported when it cannot be loaded.
Result<int> nccl_version();

class NcclGroup final : public RankGroup {
 public:
  // GPUs 0..size-1 as ranks 0..size-1. kUnsupported when NCCL cannot be loaded or fewer than
  // `size` GPUs are visible; kInternal when NCCL fails to make the communicators.
  static Result<std::unique_ptr<NcclGroup>> open(int size);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const override { return static_cast<int>(ranks_.size()); }
  // Rank r's handle: on_device(), all_reduce_sum_device and all_gather_device on GPU r. Its
  // host-memory calls are refused (kInternal): the ranks of a group of GPUs hold their rows on their GPUs. An abort
  // aborts every communicator, so ranks waiting in a sum give up; restart() makes new ones.
  Collective& rank(int r) override { return *ranks_[static_cast<size_t>(r)]; }
  int aborted_by() const override;
  Status restart() override;

  struct Comms;  // nccl_group.cpp: the communicators and who aborted

 private:
  NcclGroup() = default;
  std::shared_ptr<Comms> comms_;
  std::vector<std::unique_ptr<Collective>> ranks_;
};

}  // namespace kvf::exec::cuda::step
