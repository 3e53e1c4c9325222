// The oracle: runs any Graph eqn by eqn in plain loops. It is the reference every kernel
// and backend is checked against (DESIGN.md §7); keep it slow and obvious. Fast paths
// live in exec/.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "eval/buffer.h"
#include "ir/graph.h"

namespace kvf::eval {

enum class Precision {
  kNative,  // round every float result to its dtype (f32 values, f64 accumulation)
  kF64,     // keep every intermediate in f64: the exact reference for composition tests
};

struct EvalOptions {
  Precision precision = Precision::kNative;
  int threads = 1;  // matmul rows are shared out over this many threads
  // The group of ranks the graph's all_reduce eqns sum over (not owned; it outlives the
  // oracle). Null: a graph with an all_reduce is refused.
  Collective* group = nullptr;
};

// Buffers that live across steps (KV caches), by state name.
using StateStore = std::map<std::string, Buffer>;
// A zeroed buffer for every state value g declares that `store` lacks.
Status allocate_state(const ir::Graph& g, StateStore& store);

using SlotBindings = std::map<ir::Slot, Buffer>;
using Outputs = std::map<std::string, Buffer>;

class Oracle {
 public:
  explicit Oracle(EvalOptions opts = {});

  // Binds slots and state, evaluates every eqn, checks the validation witnesses and only
  // then publishes: donated state is written back into `state` and outputs are returned.
  // On any failure `state` is untouched and nothing is returned.
  Result<Outputs> run(const ir::Graph& g, const SlotBindings& slots, StateStore& state);

 private:
  Result<Buffer> eval_eqn(const ir::Graph& g, const ir::Eqn& e, std::span<const Buffer* const> in);
  const Buffer* constant(const ir::Value& v, Status& status);
  Result<Buffer> all_reduce(const Buffer& x);

  EvalOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  // Weights widened once: keyed by the tensor's address, dtype, shape and strides (a
  // permuted view shares the address, dtype and, when square, the shape of its source).
  // Each entry also holds the HostTensor itself, pinning its bytes: while cached, the
  // address cannot be freed and reused by another weight.
  struct Widened {
    HostTensor pin;
    Buffer values;
  };
  std::map<std::tuple<const void*, DType, Shape, Shape>, Widened> constants_;
};

}  // namespace kvf::eval
