// The CPU executor: a plan is bound once (arena, state, constants, kernel per eqn) and each
// run replays the bound list — no graph walk, no allocation, no decision per token.
#pragma once

#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "exec/attention_backend.h"
#include "exec/cpu/linear.h"
#include "exec/tensor_ref.h"
#include "exec/executor.h"
#include "exec/state.h"
#include "plan/plan.h"

namespace kvf::exec::cpu {

// Whether the linears' quantized weights are packed once at bind (pack_weights) or by each
// call that needs them packed: ahead pays where a step shape runs many times over the same
// weights (a batch's decode), and keeps a second copy of those weights (~1.2 B a weight).
enum class WeightPacking { kPerCall, kAhead };

class CpuExecutor final : public Executor {
 public:
  // Binds `plan` to the state buffers (allocating the ones it declares) and the pool, both
  // of which must outlive the executor. Refuses what no kernel here runs, naming the eqn.
  // With `attention`, every Attention eqn is placed on that backend (which must outlive the
  // executor and may refuse it: the bind fails with its error); the rest runs here. The
  // graph's all_reduce eqns sum over `group` (not owned; it outlives the executor); a graph
  // that has one is refused without it.
  static Result<std::unique_ptr<CpuExecutor>> create(plan::Plan plan, StateStore& state, ThreadPool& pool,
                                                     AttentionBackend* attention = nullptr,
                                                     WeightPacking packing = WeightPacking::kPerCall,
                                                     Collective* group = nullptr);

  Status run(const SlotValues& slots) override;
  std::span<const float> output(const std::string& name) const override;

  const plan::Plan& plan() const { return plan_; }
  int64_t arena_bytes() const { return arena_.bytes(); }

 private:
  struct Op {
    int eqn = -1;
    std::vector<Ref> in;
    Ref out;
    float* scratch = nullptr;
    int placed = -1;  // Attention on the backend: its index among the plan's Attention eqns
    std::shared_ptr<const PackedWeights> packed;  // Linear: its weights packed ahead, or null
    std::vector<WeightView> experts;              // Moe: every expert's gate, then up, then down
  };

  CpuExecutor(plan::Plan plan, StateStore& state, ThreadPool& pool, AttentionBackend* attention, WeightPacking packing,
              Collective* group);
  Status bind_values();
  Status bind_ops();
  Status run_op(const Op& op);
  void run_moe(const ir::Eqn& e, const Op& op);
  void run_lora(const Op& op);
  Status run_all_reduce(const Op& op);
  Status fold(const Op& op);

  plan::Plan plan_;
  StateStore& state_;
  ThreadPool& pool_;
  AttentionBackend* attention_;    // null: attention runs here
  WeightPacking packing_;
  Collective* group_;              // null: no all_reduce to run
  HostBuffer arena_;
  std::vector<HostBuffer> owned_;  // slots, literals, folded constants, contiguous copies
  std::vector<HostTensor> pinned_;
  std::vector<Ref> refs_;          // per value
  std::vector<bool> folded_;       // per value: computed once at bind time
  std::vector<Op> prelude_;        // what the validation witnesses need; runs first
  std::vector<Op> body_;
  std::vector<std::pair<ir::Slot, Ref>> slots_;
};

}  // namespace kvf::exec::cpu
