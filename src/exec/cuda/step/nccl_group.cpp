// NcclGroup: NCCL's entry points resolved from libnccl.so.2 at run time, one communicator per
// GPU, and the ranks' Collective handles over them.
#include "exec/cuda/step/nccl_group.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "exec/cuda/step/runtime_library.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define KVF_HAVE_NCCL_H 1
#else
#define KVF_HAVE_NCCL_H 0
#endif

namespace kvf::exec::cuda::step {

#if KVF_HAVE_NCCL_H
namespace {

// The entry points kvforge calls (the header gives their types; the library comes at run time).
struct Nccl {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

struct Loaded {
  Nccl api;
  std::string error;  // empty: every entry point resolved
};

const Loaded& loaded() {
  static const Loaded l = [] {
    static RuntimeLibrary lib("libnccl.so.2");
    Loaded out;
    lib.resolve(out.api.get_version, "ncclGetVersion");
    lib.resolve(out.api.comm_init_all, "ncclCommInitAll");
    lib.resolve(out.api.comm_destroy, "ncclCommDestroy");
    lib.resolve(out.api.comm_abort, "ncclCommAbort");
    lib.resolve(out.api.all_reduce, "ncclAllReduce");
    lib.resolve(out.api.all_gather, "ncclAllGather");
    lib.resolve(out.api.error_string, "ncclGetErrorString");
    out.error = lib.error();
    return out;
  }();
  return l;
}

Result<const Nccl*> nccl() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return unsupported("NCCL: ", l.error);
  return &l.api;
}

Error nccl_error(const Nccl& api, const char* what, ncclResult_t r) {
  return internal_error("NCCL: ", what, ": ", api.error_string(r));
}

}  // namespace

struct NcclGroup::Comms {
  const Nccl* api = nullptr;
  std::vector<ncclComm_t> comms;  // comms[r]: GPU r's
  std::atomic<int> left{-1};      // the first rank that aborted; its abort freed every comm
  ~Comms() {
    if (left.load() >= 0) return;
    for (ncclComm_t c : comms) api->comm_destroy(c);
  }
};

namespace {

Result<std::shared_ptr<NcclGroup::Comms>> make_comms(const Nccl& api, int size) {
  // NVLink multicast stays off: the machines it would run on must not use it.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  auto c = std::make_shared<NcclGroup::Comms>();
  c->api = &api;
  c->comms.resize(static_cast<size_t>(size));
  std::vector<int> gpus(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) gpus[static_cast<size_t>(r)] = r;
  if (ncclResult_t e = api.comm_init_all(c->comms.data(), size, gpus.data()); e != ncclSuccess) {
    c->left = 0;  // nothing to destroy
    return nccl_error(api, "ncclCommInitAll", e);
  }
  return c;
}

class NcclRank final : public Collective {
 public:
  NcclRank(std::shared_ptr<NcclGroup::Comms>& comms, int rank) : comms_(comms), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(comms_->comms.size()); }
  Status all_reduce_sum(std::span<float>) override { return host_memory(); }
  Status all_reduce_sum(std::span<double>) override { return host_memory(); }
  bool on_device() const override { return true; }
  Status all_reduce_sum_device(float* data, size_t count, void* stream) override {
    NcclGroup::Comms& c = *comms_;
    if (const int left = c.left.load(); left >= 0) return left_the_group(left);
    const ncclResult_t e = c.api->all_reduce(data, data, count, ncclFloat32, ncclSum, c.comms[static_cast<size_t>(rank_)],
                                             static_cast<cudaStream_t>(stream));
    if (e != ncclSuccess) return nccl_error(*c.api, "ncclAllReduce", e);
    return {};
  }
  Status all_gather(std::span<const float>, std::span<float>) override { return host_memory(); }
  Status all_gather_device(float* all, size_t count, void* stream) override {
    NcclGroup::Comms& c = *comms_;
    if (const int left = c.left.load(); left >= 0) return left_the_group(left);
    const ncclResult_t e = c.api->all_gather(all + static_cast<size_t>(rank_) * count, all, count, ncclFloat32,
                                             c.comms[static_cast<size_t>(rank_)], static_cast<cudaStream_t>(stream));
    if (e != ncclSuccess) return nccl_error(*c.api, "ncclAllGather", e);
    return {};
  }
  void abort() override {
    NcclGroup::Comms& c = *comms_;
    int none = -1;
    if (!c.left.compare_exchange_strong(none, rank_)) return;
    for (ncclComm_t comm : c.comms) c.api->comm_abort(comm);  // the others' waits end in errors
  }

 private:
  Status host_memory() const {
    return internal_error("collective: NCCL rank ", rank_, " meets in device memory; a host executor's collectives are not its");
  }
  std::shared_ptr<NcclGroup::Comms>& comms_;  // the group's, replaced by restart()
  int rank_;
};

}  // namespace

Result<int> nccl_version() {
  Result<const Nccl*> api = nccl();
  if (!api) return api.take_error();
  int v = 0;
  if (ncclResult_t e = (*api)->get_version(&v); e != ncclSuccess) return nccl_error(**api, "ncclGetVersion", e);
  return v;
}

Result<std::unique_ptr<NcclGroup>> NcclGroup::open(int size) {
  if (size < 1) return invalid_input("NCCL: a group of ", size, " ranks");
  Result<const Nccl*> api = nccl();
  if (!api) return api.take_error();
  int gpus = 0;
  if (cudaError_t e = cudaGetDeviceCount(&gpus); e != cudaSuccess) {
    return unsupported("NCCL: no usable CUDA driver or device (", cudaGetErrorString(e), ")");
  }
  if (gpus < size) return unsupported("NCCL: ", size, " ranks need ", size, " GPUs; ", gpus, " visible");
  Result<std::shared_ptr<Comms>> comms = make_comms(**api, size);
  if (!comms) return comms.take_error();
  std::unique_ptr<NcclGroup> g(new NcclGroup());
  g->comms_ = std::move(*comms);
  for (int r = 0; r < size; ++r) g->ranks_.push_back(std::make_unique<NcclRank>(g->comms_, r));
  return g;
}

NcclGroup::~NcclGroup() = default;

int NcclGroup::aborted_by() const { return comms_->left.load(); }

Status NcclGroup::restart() {
  Result<std::shared_ptr<Comms>> comms = make_comms(*comms_->api, size());
  if (!comms) return comms.take_error();
  comms_ = std::move(*comms);
  return {};
}

#else  // no nccl.h at build time

struct NcclGroup::Comms {};

Result<int> nccl_version() { return unsupported("NCCL: this kvforge was built without nccl.h"); }

Result<std::unique_ptr<NcclGroup>> NcclGroup::open(int) {
  return unsupported("NCCL: this kvforge was built without nccl.h");
}

NcclGroup::~NcclGroup() = default;
int NcclGroup::aborted_by() const { return -1; }
Status NcclGroup::restart() { return {}; }

#endif

}  // namespace kvf::exec::cuda::step
