// The CUDA step executor: a plan is bound once (device arena, device state, uploaded
// weights, one launch per eqn); the first run captures the body's launches as a CUDA graph
// and every run replays it with one launch.
// Only the slots go up and the outputs come back; a data-dependent failure inside the step
// is read from the fault record when the step ends. Plain C++: no CUDA headers.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/collective.h"
#include "exec/cuda/attention.h"
#include "exec/cuda/step/device.h"
#include "exec/executor.h"
#include "exec/state.h"
#include "exec/tensor_ref.h"
#include "plan/kv_shards.h"
#include "plan/plan.h"

namespace kvf::exec::cuda::step {

class CudaExecutor final : public Executor {
 public:
  // Binds `plan` to `state` (whose memory must be `device`; the buffers the plan declares
  // are allocated there) and uploads the weights it reads. Refuses what no kernel here runs,
  // naming the eqn. The device and the state outlive the executor, and so does `group`: the
  // ranks the plan's all_reduce eqns sum over (null: a plan with one is refused). A group of
  // host ranks (core/collective.h's ThreadGroup) is met through pinned memory: each
  // all_reduce copies its rows to the host, waits for them and copies the sums back, so such
  // a step runs its eqns one by one rather than as one graph (correct, not fast).
  // kv_block > 0: `group` is a context-parallel group instead (kv_parallel.cpp), this
  // executor its rank group->rank(), every rank running the whole step but its attention only
  // over the rank's keys, the ranks' partials and softmax states gathered over the group and
  // merged, giving the one-device answer. A paged step's pools are shared out: the rank holds
  // their blocks b with b mod ranks == rank (plan::PoolShards, blocks of kv_block slots, in
  // `state` as a PoolShare), writes only the new keys that land there and runs every attention
  // (decode, chunk, prefill) over them. A dense cache is held whole by every rank: each
  // one-row decode attention reads the rank's blocks of kv_block positions (plan::KvShards),
  // and prefills run whole.
  static Result<std::unique_ptr<CudaExecutor>> create(plan::Plan plan, StateStore& state, Device& device,
                                                      Collective* group = nullptr, int64_t kv_block = 0);
  ~CudaExecutor() override;

  Status run(const SlotValues& slots) override;
  std::span<const float> output(const std::string& name) const override;
  Result<std::span<const int32_t>> run_argmax(const SlotValues& slots, const std::string& name, int64_t row) override;
  bool samples_on_device() const override { return true; }
  Result<std::span<const int32_t>> run_sample(const SlotValues& slots, const std::string& name, int64_t row,
                                              const StepDraws& draws) override;

  // What each launch of the step's body runs, in order: the names KVF_CUDA_PROFILE times.
  std::vector<std::string> launch_labels() const;

 private:
  struct Op {
    int eqn = -1;
    std::vector<Ref> in;
    Ref out;
    float* scratch = nullptr;  // the plan's scratch for the eqn (split-key partials)
    int grouped = 0;       // > 0: linears (and a glu or residual add) run as one launch
    LinearGroup group;
    bool round_update = false;  // a cache write (update slice, scatter) of f32 rows into a half cache (the cast fused)
    bool slots_checked = false;  // a scatter whose slot map an earlier scatter of the step checked
    // Attention through the split-KV decode kernel (exec/cuda/attention.h) instead of
    // attention_rows: set by bind_decode_attention when the op is one it runs.
    bool decode_kernel = false;
    DecodeAttentionArgs decode;
    DecodePlan decode_plan;
    // A causal prefill on the tensor-core tile kernel (the plan's kTiles schedule).
    bool tiles = false;
    StepPrefillArgs tile_args;
    Pack pack;  // tasks > 0: ropes and cache writes run as one launch (pack.cu)
    // > 0: this many small elementwise ops from chain_tasks_[chain_at] on run in one launch
    int chain = 0;
    int64_t chain_at = 0;
    int validation = -1;  // >= 0: checks that validation's witness (in[0]) on the device
    const void* const* experts = nullptr;  // Moe: a device table of every expert's gate, up, down weights
    float* staged = nullptr;  // AllReduce over host ranks: the pinned rows the ranks sum
    int kv_parallel = -1;     // >= 0: a context-parallel attention, kv_parallel_[kv_parallel]
  };

  // An attention of a context-parallel rank (kv_parallel.cpp): it reads the rank's keys
  // through `shard`'s local map and lengths (made by this op's launch when make_map, else by
  // an earlier op's over the same lengths and map), on the split-KV decode kernel (op.decode)
  // or, with `rows_kernel`, attention_rows (rows_args), and writes its partial and softmax
  // state into its place of the ranks' parts, which the gathers fill and the merge reads.
  struct KvParallelOp {
    KvShardMap shard;
    bool make_map = false;
    bool rows_kernel = false;
    AttentionArgs rows_args;
    int splits = 1;              // attention_rows' key splits (op.scratch their partials)
    int64_t rows = 0, dv = 0;
    float* out = nullptr;        // the eqn's output [rows, dv]
    float* parts = nullptr;      // [ranks][rows * dv + rows * 2]: each rank's o, then its ml (one gather)
    float* staged = nullptr;     // host ranks: pinned [rows * (dv + 2)] mine, then [ranks * rows * (dv + 2)] all
    int64_t part_floats() const { return rows * (dv + 2); }
  };
  // Tokens in place of an output's rows of `row`: greedy (row_argmax), or drawn by the
  // draws already in draws_device_ (draw_tokens) for the first `rows` rows.
  struct IdsOf {
    const std::string& name;
    int64_t row = 0;
    int64_t rows = 0;
    bool drawn = false;
  };

  CudaExecutor(plan::Plan plan, StateStore& state, Device& device, Collective* group, int64_t kv_block);
  // run(), or with `ids` the tokens of that output in ids_host_ instead of the output itself.
  Status run_step(const SlotValues& slots, const IdsOf* ids);
  // The rows of `row` of output `name`, with room for that many ids on the device and host.
  Result<int64_t> ids_rows(const std::string& name, int64_t row);
  Status bind_values();
  Status bind_ops();
  Status check(size_t eqn) const;
  Status bind_experts(Op& op);
  MoeArgs moe_args(const Op& op) const;
  Result<void*> own(const ir::TensorType& t);
  Status launch(const Op& op);  // launch_eqn.cpp, by family:
  Status launch_layout(const Op& op, const ir::Eqn& e, const Launch& l);
  Status launch_state_write(const Op& op, const ir::Eqn& e, const Launch& l);
  Status launch_math(const Op& op, const ir::Eqn& e, const Launch& l);
  Status launch_attention(const Op& op, const ir::Eqn& e, const Launch& l);
  Status all_reduce(const Op& op);
  void group_linears();
  void fuse_rounding_casts();
  void fuse_norms();
  void pack_small_ops();
  // A linear group followed by a pack that reads only the group's outputs carries the pack
  // (LinearGroup::then): one launch where the one-row kernel runs it in its epilogue.
  void fold_packs_into_groups();
  // Runs of small elementwise ops (a step's position and length arithmetic) become one
  // launch each: pointwise_chain over their tasks, uploaded here.
  Status chain_small_ops();
  bool chain_task(const Op& op, ChainTask& t) const;
  void check_slots_once();
  void merge_rope_writes();
  bool pack_task(const Op& op, PackTask& t) const;
  bool independent(const Op& a, const Op& b) const;
  Status bind_tensor_cores();
  // A glu group followed by the linear group that reads its output as x (where
  // hands_rounded_x): the glu stores it rounded to 16 bits as well, and the group behind reads
  // that instead of launching its own rounding. After bind_tensor_cores (the kernels' choice).
  Status hand_off_rounded_x();
  Status bind_decode_attention();
  Status bind_kv_parallel();  // kv_parallel.cpp
  Status bind_rank_attention(Op& op, KvParallelOp& kp);
  Status bind_partials(int64_t parts_floats);
  Status kv_parallel_attention(const Op& op);
  Status gather_partials(const KvParallelOp& kp);
  bool decode_args(const Op& op, DecodeAttentionArgs& a) const;
  static void tell_written_keys(const Op& front, DecodeAttentionArgs& a);
  Status bind_tile_attention();
  AttentionArgs attention_args_of(const Op& op) const;
  void stage_slots(const SlotValues& slots);
  Status enqueue_step_start();  // the fault record cleared, the staged slots copied in
  Status enqueue_body();        // the step's start, then the body
  Status read_faults();
  Status run_body();
  Status run_timed();  // KVF_CUDA_PROFILE: each eqn alone between events
  std::string label(const Op& op) const;

  plan::Plan plan_;
  StateStore& state_;
  Device& device_;
  Collective* group_;
  int64_t kv_block_ = 0;  // > 0: group_ is context parallel, over blocks of this many positions
  // A paged step of a context-parallel rank: the rank holds only its blocks of the pools
  // (plan::PoolShards over kv_block_ slots) and the write map is turned into its rows there.
  std::optional<plan::PoolShards> pool_split_;
  std::vector<KvParallelOp> kv_parallel_;
  std::vector<Buffer> staging_;  // pinned rows of the all_reduce eqns (or the partials' gathers) over host ranks
  Buffer arena_;
  TensorCores tc_;       // the device's cuBLASLt and this executor's scratch for it
  Buffer tc_scratch_;
  Buffer tc_counters_;
  Buffer x16_handoff_;   // hand_off_rounded_x's copies (one pair of groups at a time)
  Buffer decode_workspace_;  // one for every decode-kernel attention of the step (they run in turn)
  std::vector<Buffer> owned_;    // slots, literals, folded values, prelude values
  std::vector<Ref> refs_;        // per value
  std::vector<bool> folded_;     // per value: computed once at bind time
  std::vector<Op> prelude_;      // what the validation witnesses need: the body's first ops
  std::vector<Op> body_;
  struct SlotCopy {
    ir::Slot slot;
    int value = 0;       // its ir::ValueId
    int64_t offset = 0;  // into slot_staging_ and slots_device_ alike
    int64_t bytes = 0;
  };
  std::vector<SlotCopy> slot_copies_;
  Buffer slot_staging_;  // pinned: the step's slot values, which its first copy reads
  Buffer slots_device_;  // the slots on the device, laid out as slot_staging_
  // The validations as the host evaluates them before a step launches (exec/step_checks.h);
  // empty when the prelude reads what the host does not hold or more than it should, and
  // the step's graph checks the witnesses itself (check_witness).
  std::optional<ir::Graph> host_checks_;
  std::vector<ChainTask> chain_host_;  // every chain's tasks, in order, and their device copy
  Buffer chain_tasks_;
  struct HostCopy {
    Ref device;
    Buffer host;  // pinned_memory(): the copy back runs at the link's speed
  };
  std::map<std::string, HostCopy> outputs_;             // the f32 outputs, copied back each run
  Buffer ids_host_;  // run_argmax's or run_sample's ids, pinned: the kernels store them there
  Buffer fault_host_;  // the step's fault record, copied back with its outputs (one wait a step, not two)
  Buffer draws_device_, edits_device_;  // run_sample's draws and their logit edits
  void* body_graph_ = nullptr;   // the body captured once (a cudaGraphExec_t), replayed per run
};

}  // namespace kvf::exec::cuda::step
