#include "exec/cuda/step/executor.h"

#include <algorithm>
#include <cstring>

#include "exec/cuda/step/eqn_args.h"
#include "exec/cuda/step/pinned_memory.h"
#include "exec/step_checks.h"
#include "ir/printer.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;
using ir::ValueKind;

namespace {

// The most elements of any value the host evaluates a step's validations over. The host
// runs them on the oracle before the launch, while the device waits (about 25 ns an element:
// 0.56 ms a step for a paged batch's key positions, 64 rows of 256 keys, in
// bench_oracle); inside the step's graph they cost the device a few microseconds whatever
// their size. So the host takes a one-row decode step's scalars and nothing larger.
constexpr int64_t kHostCheckElements = 64;

// What the attention kernels read: f32 or f16 K/V, rows of at most kAttentionRowsMaxWidth,
// and paged pools only through a read-map slot declared over their rows (`read`).
Status check_attention_rows(const ir::Graph& g, const ir::Eqn& e, const plan::AttentionRequest& r, ir::ValueId read) {
  const DType kv = g.type(e.in[1]).dtype;
  if (kv != DType::kF32 && kv != DType::kF16) return unsupported("exec/cuda: attention over ", dtype_name(kv), " K/V");
  if (r.dk + r.ds > kAttentionRowsMaxWidth || r.dv > kAttentionRowsMaxWidth) {
    return unsupported("exec/cuda: attention rows wider than ", kAttentionRowsMaxWidth);
  }
  if (!e.params.attn.has_read) return {};
  const ir::Value& map = g.value(read);
  if (map.kind != ValueKind::kSlot || map.slot != ir::Slot::kSlotMap || map.slot_bound != g.type(e.in[1]).shape[0]) {
    return unsupported("exec/cuda: paged attention reads its pools through ", ir::value_ref(g, read),
                       ", not a read-map slot declared over the pool's rows");
  }
  return {};
}

std::string fault_text(const FaultRecord& f) {
  switch (static_cast<DeviceFault>(f.code)) {
    case DeviceFault::kGatherIndex: return str_cat("gather: index ", f.value, " is outside the table");
    case DeviceFault::kUpdateOverflow: return str_cat("dynamic_update_slice: the update at ", f.value, " overflows its axis");
    case DeviceFault::kScatterSlot: return str_cat("scatter_update: slot ", f.value, " is outside the pool");
    case DeviceFault::kScatterTwice: return str_cat("scatter_update: slot ", f.value, " is written twice");
    case DeviceFault::kDivideByZero: return "div: integer division by zero";
    case DeviceFault::kCastRange: return "cast: a value does not fit i32";
    default: return str_cat("fault ", f.code);
  }
}

ErrorCode fault_code(const FaultRecord& f) {
  return static_cast<DeviceFault>(f.code) == DeviceFault::kUpdateOverflow ? ErrorCode::kCapacity : ErrorCode::kInvalidInput;
}

}  // namespace

CudaExecutor::CudaExecutor(plan::Plan plan, StateStore& state, Device& device, Collective* group, int64_t kv_block)
    : plan_(std::move(plan)), state_(state), device_(device), group_(group), kv_block_(kv_block) {}

Result<std::unique_ptr<CudaExecutor>> CudaExecutor::create(plan::Plan plan, StateStore& state, Device& device,
                                                           Collective* group, int64_t kv_block) {
  if (&state.memory() != &device) {
    return internal_error("exec/cuda: the state lives in ", state.memory().name(), ", not on ", device.name());
  }
  if (kv_block > 0 && group == nullptr) return internal_error("exec/cuda: context parallel without a group of ranks");
  std::unique_ptr<CudaExecutor> ex(new CudaExecutor(std::move(plan), state, device, group, kv_block));
  PoolShare share;
  const ir::Graph& g = ex->plan_.graph;
  if (const ir::ValueId read = g.find_slot(ir::Slot::kSlotMap); kv_block > 0 && read >= 0) {
    ex->pool_split_ = plan::PoolShards{group->size(), kv_block};
    share.pool_slots = g.values[static_cast<size_t>(read)].slot_bound;
    share.rows_held = ex->pool_split_->rows_held(share.pool_slots);
  }
  Status s = state.allocate(g, share);
  if (!s) return s.take_error();
  s = ex->bind_values();
  if (!s) return s.take_error().context("exec/cuda ", ex->plan_.graph.name);
  s = ex->bind_ops();
  if (!s) return s.take_error().context("exec/cuda ", ex->plan_.graph.name);
  Result<void*> fault_host = pinned_memory().allocate_zeroed(sizeof(FaultRecord));
  if (!fault_host) return fault_host.take_error().context("the fault record's host copy");
  ex->fault_host_ = Buffer(&pinned_memory(), *fault_host, sizeof(FaultRecord));
  s = device.synchronize("bind");  // the uploads and folded eqns
  if (!s) return s.take_error();
  Result<FaultRecord> f = device.read_fault();
  if (!f) return f.take_error();
  if (f->code != 0) return Error(fault_code(*f), fault_text(*f)).context("exec/cuda folding eqn ", f->eqn);
  return ex;
}

CudaExecutor::~CudaExecutor() { Device::destroy_graph(body_graph_); }

Result<void*> CudaExecutor::own(const ir::TensorType& t) {
  const int64_t bytes = numel(t.shape) * elem_bytes(t.dtype);
  Result<void*> p = device_.allocate_zeroed(bytes);
  if (!p) return p.take_error();
  owned_.emplace_back(&device_, *p, bytes);
  return *p;
}

Status CudaExecutor::bind_values() {
  const ir::Graph& g = plan_.graph;
  Result<void*> arena = device_.allocate_zeroed(plan_.buffers.arena_bytes);
  if (!arena) return arena.take_error().context("arena");
  arena_ = Buffer(&device_, *arena, plan_.buffers.arena_bytes);
  refs_.resize(g.values.size());
  folded_.assign(g.values.size(), false);
  for (size_t i = 0; i < g.values.size(); ++i) {
    const ir::Value& v = g.values[i];
    const int64_t n = numel(v.type.shape);
    switch (v.kind) {
      case ValueKind::kSlot: {  // placed in the slots' block below, as they lie in the staging
        refs_[i] = Ref{nullptr, v.type, n};
        const int64_t at = slot_copies_.empty() ? 0 : slot_copies_.back().offset + (slot_copies_.back().bytes + 15) / 16 * 16;
        slot_copies_.push_back({v.slot, static_cast<int>(i), at, n * elem_bytes(v.type.dtype)});
        break;
      }
      case ValueKind::kLiteral: {
        Result<void*> p = own(v.type);
        if (!p) return p.take_error();
        refs_[i] = Ref{*p, v.type, n};
        uint32_t bits = 0;
        if (v.type.dtype == DType::kF32) {
          const auto f = static_cast<float>(v.literal);
          std::memcpy(&bits, &f, 4);
        } else if (v.type.dtype == DType::kI32) {
          bits = static_cast<uint32_t>(static_cast<int32_t>(v.literal));
        } else if (v.type.dtype == DType::kBool) {
          bits = v.literal != 0;
        } else {
          return unsupported("literal of ", dtype_name(v.type.dtype));
        }
        Status s = device_.copy_to_device(*p, &bits, elem_bytes(v.type.dtype));
        if (!s) return s;
        Status sync = device_.synchronize("literal");  // bits is on this stack frame
        if (!sync) return sync;
        folded_[i] = true;
        break;
      }
      case ValueKind::kConstant: {
        Result<const void*> p = device_.upload(v.data);
        if (!p) return p.take_error().context("constant ", v.name);
        refs_[i] = Ref{const_cast<void*>(*p), v.type, n};
        folded_[i] = true;
        break;
      }
      case ValueKind::kState: {
        StateBuffer* sb = state_.find(v.name);
        if (sb == nullptr) return internal_error("state ", v.name, " was not allocated");
        refs_[i] = Ref{sb->buf.data(), v.type, n};
        break;
      }
      case ValueKind::kIntermediate: break;
    }
  }
  // The slots lie in one device block laid out as their pinned staging: a step's start is one
  // copy, not one a slot.
  const int64_t staged = slot_copies_.empty() ? 16 : slot_copies_.back().offset + slot_copies_.back().bytes;
  Result<void*> host = pinned_memory().allocate_zeroed(staged);
  if (!host) return host.take_error().context("the slots' staging");
  slot_staging_ = Buffer(&pinned_memory(), *host, staged);
  Result<void*> block = device_.allocate_zeroed(staged);
  if (!block) return block.take_error().context("the slots");
  slots_device_ = Buffer(&device_, *block, staged);
  for (const SlotCopy& c : slot_copies_) refs_[static_cast<size_t>(c.value)].data = static_cast<char*>(*block) + c.offset;
  return {};
}

Status CudaExecutor::check(size_t eqn) const {
  const ir::Graph& g = plan_.graph;
  const ir::Eqn& e = g.eqns[eqn];
  const ir::TensorType& out = g.type(e.out);
  if (out.shape.size() > static_cast<size_t>(kMaxRank)) return unsupported("exec/cuda: rank ", out.shape.size(), " > ", kMaxRank);
  for (ir::ValueId v : e.in) {
    if (g.type(v).shape.size() > static_cast<size_t>(kMaxRank)) return unsupported("exec/cuda: rank > ", kMaxRank);
    if (is_kquant(g.type(v).dtype)) {
      return unsupported("exec/cuda: ", dtype_name(g.type(v).dtype), " weights (llm::compile_step widens k-quants to f16 first)");
    }
  }
  switch (e.op) {
    case OpKind::kLinear: {
      const DType w = g.type(e.in[1]).dtype;
      if (!is_float(w) && !is_block_quant(w)) return unsupported("exec/cuda: linear over ", dtype_name(w), " weights");
      return {};
    }
    case OpKind::kAttention: return check_attention_rows(g, e, plan_.requests[eqn].attention, e.in.back());
    case OpKind::kRmsNorm: case OpKind::kRope: case OpKind::kSoftmax: case OpKind::kGlu: case OpKind::kLora: return {};
    case OpKind::kBlockTopK: return {};
    case OpKind::kAllReduce:
      if (group_ == nullptr) return invalid_input("exec/cuda: all_reduce in a step run without a group of ranks");
      if (kv_block_ > 0) return invalid_input("exec/cuda: all_reduce in a context-parallel rank's step (each runs the whole model)");
      if (g.type(e.out).dtype != DType::kF32) return unsupported("exec/cuda: all_reduce of ", dtype_name(g.type(e.out).dtype));
      return {};
    case OpKind::kIndexerScores: {
      const Shape& q = g.type(e.in[0]).shape;
      const DType k = g.type(e.in[1]).dtype;
      if (k != DType::kF32 && k != DType::kF16) return unsupported("exec/cuda: indexer keys of ", dtype_name(k));
      if (q[1] * q[3] + q[1] > kIndexerMaxFloats) {
        return unsupported("exec/cuda: an indexer of ", q[1], " heads of ", q[3], " (more than ", kIndexerMaxFloats,
                           " floats of queries a row)");
      }
      return {};
    }
    case OpKind::kSelectedAttention: {
      const plan::AttentionRequest& r = plan_.requests[eqn].attention;
      if (!e.params.attn.has_read && r.hkv != 1) return unsupported("exec/cuda: selected attention over dense keys of ", r.hkv, " heads");
      return check_attention_rows(g, e, r, e.in[e.in.size() - 3]);
    }
    case OpKind::kMoe: {
      const size_t experts = (e.in.size() - 2) / 3;
      for (size_t i = 2; i < e.in.size(); ++i) {
        const DType w = g.type(e.in[i]).dtype, first = g.type(e.in[i < 2 + 2 * experts ? 2 : 2 + 2 * experts]).dtype;
        if (!is_float(w) && !is_block_quant(w)) return unsupported("exec/cuda: experts over ", dtype_name(w), " weights");
        if (w != first) {
          return unsupported("exec/cuda: experts whose ", i < 2 + 2 * experts ? "gate and up" : "down", " weights mix ",
                             dtype_name(first), " and ", dtype_name(w));
        }
      }
      return {};
    }
    case OpKind::kCast:
      if (!word(out.dtype) && !(half(out.dtype) && g.type(e.in[0]).dtype == DType::kF32)) {
        return unsupported("exec/cuda: cast from ", dtype_name(g.type(e.in[0]).dtype), " to ", dtype_name(out.dtype));
      }
      return {};
    case OpKind::kGather:
      if (!word(out.dtype) && !half(out.dtype)) return unsupported("exec/cuda: gather to ", dtype_name(out.dtype));
      return {};
    case OpKind::kReduceSum: case OpKind::kReduceMax: {
      std::vector<int64_t> axes = e.params.axes;
      std::sort(axes.begin(), axes.end());
      for (size_t i = 1; i < axes.size(); ++i) {
        if (axes[i] != axes[i - 1] + 1) return unsupported("exec/cuda: reduce over non-adjacent axes");
      }
      if (g.type(e.in[0]).dtype != DType::kF32 && g.type(e.in[0]).dtype != DType::kI32) {
        return unsupported("exec/cuda: reduce over ", dtype_name(g.type(e.in[0]).dtype));
      }
      return {};
    }
    default: break;
  }
  const bool moves = e.op == OpKind::kReshape || e.op == OpKind::kTranspose || e.op == OpKind::kBroadcast ||
                     e.op == OpKind::kSlice || e.op == OpKind::kConcat || e.op == OpKind::kDynamicUpdateSlice ||
                     e.op == OpKind::kScatterUpdate;
  for (ir::ValueId v : e.in) {
    const DType d = g.type(v).dtype;
    if (!word(d) && !(moves && half(d))) return unsupported("exec/cuda: ", ir::op_name(e.op), " over ", ir::type_str(g.type(v)));
  }
  if (e.op == OpKind::kMatMul && out.dtype != DType::kF32) return unsupported("exec/cuda: matmul over ", ir::type_str(out));
  if (ir::is_unary(e.op) && out.dtype == DType::kBool) return unsupported("exec/cuda: unary over pred");
  return {};
}

Status CudaExecutor::bind_ops() {
  const ir::Graph& g = plan_.graph;
  const std::vector<bool> lazy = plan::gathered_in_stored_type(g);
  const std::vector<bool> in_prelude = validation_prelude(g);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const ir::Eqn& e = g.eqns[i];
    const auto out = static_cast<size_t>(e.out);
    const ir::TensorType& ot = g.type(e.out);
    Op op{static_cast<int>(i), {}, {}};
    // A collective is never folded at bind: the ranks bind one after another, not together.
    bool constant_inputs = !ir::is_collective(e.op);
    for (ir::ValueId v : e.in) {
      op.in.push_back(refs_[static_cast<size_t>(v)]);
      constant_inputs = constant_inputs && folded_[static_cast<size_t>(v)];
    }
    if (lazy[i]) {  // the gathers read the stored table
      refs_[out] = refs_[static_cast<size_t>(e.in[0])];
      folded_[out] = true;
      continue;
    }
    const ir::ValueId owner = plan_.buffers.storage_of[out];
    if (owner != e.out) {
      refs_[out] = Ref{refs_[static_cast<size_t>(owner)].data, ot, numel(ot.shape)};
      folded_[out] = folded_[static_cast<size_t>(owner)];
      if (plan::is_alias(g, e)) continue;  // nothing to run
    } else if (constant_inputs || in_prelude[i]) {
      Result<void*> p = own(ot);
      if (!p) return p.take_error();
      refs_[out] = Ref{*p, ot, numel(ot.shape)};
    } else {
      refs_[out] = Ref{static_cast<char*>(arena_.data()) + plan_.buffers.offset[out], ot, numel(ot.shape)};
    }
    op.out = refs_[out];
    Status s = check(i);
    if (s && e.op == OpKind::kMoe) s = bind_experts(op);
    if (!s) return s.take_error().context("eqn ", i);
    if (constant_inputs && owner == e.out) {  // weights-only work happens once, here
      s = launch(op);
      if (!s) return s.take_error().context("folding eqn ", i);
      folded_[out] = true;
      continue;
    }
    if (in_prelude[i] && (ir::is_fused(e.op) || ir::is_collective(e.op))) {
      return internal_error("a validation depends on eqn ", i, " (", ir::op_name(e.op), ")");
    }
    if (e.op == OpKind::kAllReduce && !group_->on_device()) {
      Result<void*> host = pinned_memory().allocate_zeroed(op.out.numel * 4);
      if (!host) return host.take_error().context("all_reduce staging, eqn ", i);
      staging_.emplace_back(&pinned_memory(), *host, op.out.numel * 4);
      op.staged = static_cast<float*>(*host);
    }
    if (plan_.buffers.scratch_offset[i] >= 0) {
      op.scratch = reinterpret_cast<float*>(static_cast<char*>(arena_.data()) + plan_.buffers.scratch_offset[i]);
    }
    (in_prelude[i] ? prelude_ : body_).push_back(std::move(op));
  }
  for (const ir::Output& o : g.outputs) {
    if (g.type(o.value).dtype != DType::kF32) continue;
    const Ref& r = refs_[static_cast<size_t>(o.value)];
    Result<void*> host = pinned_memory().allocate_zeroed(r.numel * 4);
    if (!host) return host.take_error().context("the output ", o.name);
    outputs_[o.name] = HostCopy{r, Buffer(&pinned_memory(), *host, r.numel * 4)};
  }
  group_linears();
  fuse_norms();
  fuse_rounding_casts();
  check_slots_once();  // before the packs: a pool write joins one only once its slots are checked
  pack_small_ops();
  fold_packs_into_groups();
  host_checks_ = host_validations(g, kHostCheckElements);
  if (!host_checks_) {  // the graph checks each witness after the prelude, before any state is written
    // Once a witness: every layer's attention guards the same lengths, one value after cse,
    // and the first validation over a witness is the one a false element names on the host.
    std::vector<bool> checked(g.values.size(), false);
    for (size_t k = 0; k < g.validations.size(); ++k) {
      const ir::ValueId w = g.validations[k].witness;
      if (checked[static_cast<size_t>(w)]) continue;
      checked[static_cast<size_t>(w)] = true;
      Op check{std::max(0, g.value(w).producer), {refs_[static_cast<size_t>(w)]}, {}};
      check.validation = static_cast<int>(k);
      prelude_.push_back(std::move(check));
    }
  }
  // The prelude's values feed the body too (the guarded lengths): they run first in the graph.
  body_.insert(body_.begin(), std::make_move_iterator(prelude_.begin()), std::make_move_iterator(prelude_.end()));
  prelude_.clear();
  Status chained = chain_small_ops();
  if (!chained) return chained;
  Status s = bind_decode_attention();
  if (s) s = bind_kv_parallel();
  if (s) s = bind_tile_attention();
  if (s) s = bind_tensor_cores();
  if (s) s = hand_off_rounded_x();
  return s;
}

// The experts' weights as one device table the kernels index by expert: gate, up, down.
Status CudaExecutor::bind_experts(Op& op) {
  std::vector<const void*> table;
  for (size_t i = 2; i < op.in.size(); ++i) table.push_back(op.in[i].data);
  const auto bytes = static_cast<int64_t>(table.size() * sizeof(void*));
  Result<void*> p = device_.allocate_zeroed(bytes);
  if (!p) return p.take_error().context("the experts' table");
  owned_.emplace_back(&device_, *p, bytes);
  Status s = device_.copy_to_device(*p, table.data(), bytes);
  if (s) s = device_.synchronize("the experts' table");  // `table` is on this stack frame
  if (!s) return s;
  op.experts = static_cast<const void* const*>(*p);
  return {};
}

MoeArgs CudaExecutor::moe_args(const Op& op) const {
  const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
  const plan::MoeRequest& r = plan_.requests[static_cast<size_t>(op.eqn)].moe;
  MoeArgs a;
  a.x = static_cast<const float*>(op.in[0].data);
  a.weights = static_cast<const float*>(op.in[1].data);
  a.rows = r.rows;
  a.dim = r.dim;
  a.ffn = r.ffn;
  a.experts = r.experts;
  a.gate = op.experts;
  a.up = op.experts + r.experts;
  a.down = op.experts + 2 * r.experts;
  a.gate_dt = op.in[2].type.dtype;
  a.down_dt = op.in.back().type.dtype;
  a.act = glu_act(e.params.glu);
  a.gathered = r.gathered;
  a.experts_per_pass = r.experts_per_pass;
  a.tensor_cores = r.tensor_cores;
  a.scratch = op.scratch;
  a.out = static_cast<float*>(op.out.data);
  return a;
}

// One scratch for every tensor-core linear of the step (they run one after another): sized
// here, since nothing may be allocated while the body is captured.
Status CudaExecutor::bind_tensor_cores() {
  if (!plan_.caps.half_compute) return {};  // every linear from f32 inputs: no tensor cores
  tc_ = device_.tensor_cores();
  if (tc_.handle == nullptr) return {};
  int64_t bytes = 0, counters = 0;
  for (const Op& op : body_) {
    const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
    if (op.grouped == 0 && e.op != OpKind::kLinear) continue;
    const ir::TensorType& w = op.in[1].type;
    const int64_t k = w.shape[1], m = op.in[0].numel / k;
    LinearGroup one;
    one.part[0].n = w.shape[0];
    const LinearGroup& g = op.grouped > 0 ? op.group : one;
    for (int p = 0; p < g.parts; ++p) bytes = std::max(bytes, tensor_core_scratch_bytes(m, k, g.part[p].n, w.dtype));
    for (const GemmRowsScratch& rows : {gemm_rows_scratch(m, k, w.dtype, g), gemm_stream_scratch(m, k, w.dtype, g)}) {
      bytes = std::max(bytes, rows.bytes);
      counters = std::max(counters, rows.counters);
    }
  }
  if (bytes == 0) return {};
  Result<void*> p = device_.allocate_zeroed(bytes);
  if (!p) return p.take_error().context("tensor-core scratch");
  tc_scratch_ = Buffer(&device_, *p, bytes);
  tc_.scratch = *p;
  tc_.scratch_bytes = bytes;
  if (counters > 0) {
    Result<void*> c = device_.allocate_zeroed(counters * static_cast<int64_t>(sizeof(unsigned)));
    if (!c) return c.take_error().context("tensor-core tile counters");
    tc_counters_ = Buffer(&device_, *c, counters * static_cast<int64_t>(sizeof(unsigned)));
    tc_.counters = static_cast<unsigned*>(*c);
    tc_.counter_count = counters;
  }
  return {};
}

// The step's fault record, from its host copy: run_step enqueues that copy behind the step's
// outputs, so the one wait for them brings it too.
Status CudaExecutor::read_faults() {
  FaultRecord f;
  std::memcpy(&f, fault_host_.data(), sizeof f);
  if (f.code == 0) return {};
  const ir::Graph& g = plan_.graph;
  // check_witness records the validation's index (one bind_ops gave it) in place of an eqn.
  if (static_cast<DeviceFault>(f.code) == DeviceFault::kValidation) {
    return validation_failed(g, g.validations[static_cast<size_t>(f.eqn)], f.value);
  }
  return Error(fault_code(f), fault_text(f)).context(g.name, " eqn ", f.eqn);
}

Status CudaExecutor::run(const SlotValues& slots) { return run_step(slots, nullptr); }

Result<int64_t> CudaExecutor::ids_rows(const std::string& name, int64_t row) {
  auto it = outputs_.find(name);
  if (it == outputs_.end() || row < 1 || it->second.device.numel % row != 0) {
    return invalid_input("exec/cuda: output '", name, "' is not rows of ", row);
  }
  const int64_t rows = it->second.device.numel / row;
  if (ids_host_.bytes() < rows * 4) {
    Result<void*> h = pinned_memory().allocate_zeroed(rows * 4);
    if (!h) return h.take_error().context("token ids");
    ids_host_ = Buffer(&pinned_memory(), *h, rows * 4);
  }
  return rows;
}

// The ids go back instead of the rows: [rows] i32 against [rows, row] f32 (a 64-row batch's
// logits are 8 MB a step, its ids 256 bytes), and no host scan of the rows.
Result<std::span<const int32_t>> CudaExecutor::run_argmax(const SlotValues& slots, const std::string& name, int64_t row) {
  Result<int64_t> rows = ids_rows(name, row);
  if (!rows) return rows.take_error();
  const IdsOf ids{name, row, *rows, false};
  Status s = run_step(slots, &ids);
  if (!s) return s.take_error();
  return std::span<const int32_t>(static_cast<const int32_t*>(ids_host_.data()), static_cast<size_t>(*rows));
}

// Only the draws go up (a few dozen bytes a row, and the edits of the rows that have any).
Result<std::span<const int32_t>> CudaExecutor::run_sample(const SlotValues& slots, const std::string& name, int64_t row,
                                                          const StepDraws& draws) {
  Result<int64_t> rows = ids_rows(name, row);
  if (!rows) return rows.take_error();
  Status s = check_draws(draws, *rows);
  const auto grow = [&](Buffer& b, int64_t bytes, const char* what) -> Status {
    if (b.bytes() >= bytes) return {};
    Result<void*> d = device_.allocate_zeroed(bytes);
    if (!d) return d.take_error().context(what);
    b = Buffer(&device_, *d, bytes);
    return {};
  };
  const auto n = static_cast<int64_t>(draws.rows.size());
  const auto edit_bytes = static_cast<int64_t>(draws.edits.size() * sizeof(LogitEdit));
  if (s) s = grow(draws_device_, std::max<int64_t>(n, 1) * static_cast<int64_t>(sizeof(RowDraw)), "row draws");
  if (s) s = grow(edits_device_, std::max<int64_t>(edit_bytes, 1), "logit edits");
  if (s) s = device_.copy_to_device(draws_device_.data(), draws.rows.data(), n * static_cast<int64_t>(sizeof(RowDraw)));
  if (s) s = device_.copy_to_device(edits_device_.data(), draws.edits.data(), edit_bytes);
  const IdsOf ids{name, row, n, true};
  if (s) s = run_step(slots, &ids);
  if (!s) return s.take_error();
  return std::span<const int32_t>(static_cast<const int32_t*>(ids_host_.data()), static_cast<size_t>(n));
}

void CudaExecutor::stage_slots(const SlotValues& slots) {
  for (const SlotCopy& c : slot_copies_) {
    char* at = static_cast<char*>(slot_staging_.data()) + c.offset;
    std::memcpy(at, slots.at(c.slot).data(), static_cast<size_t>(c.bytes));
    if (c.slot == ir::Slot::kWriteMap && pool_split_) {  // checked whole above; the rank writes its share
      auto* words = reinterpret_cast<int32_t*>(at);
      for (int64_t i = 0; i < c.bytes / 4; ++i) words[i] = pool_split_->write_word(group_->rank(), words[i]);
    }
  }
}

Status CudaExecutor::enqueue_step_start() {
  Status s = device_.clear_fault();
  if (s && !slot_copies_.empty()) s = device_.copy_to_device(slots_device_.data(), slot_staging_.data(), slot_staging_.bytes());
  return s;
}

Status CudaExecutor::enqueue_body() {
  Status s = enqueue_step_start();
  for (const Op& op : body_) {
    if (!s) break;
    s = launch(op);
    if (!s) s = s.take_error().context(plan_.graph.name, " eqn ", op.eqn);
  }
  return s;
}

// The previous step has ended (its outputs were waited for), so the staging and the device's
// slots are free to take this one's.
Status CudaExecutor::run_step(const SlotValues& slots, const IdsOf* ids) {
  Status s = check_slots(plan_.graph, slots);  // every slot checked before any is copied in
  if (s && host_checks_) s = check_on_host(plan_.graph, *host_checks_, slots);
  if (!s) return s;
  stage_slots(slots);
  s = run_body();
  if (!s) return s;
  for (auto& [name, copy] : outputs_) {
    if (ids != nullptr && name == ids->name) {
      const Launch l{device_.stream(), device_.fault(), -1, tc_};
      auto* x = static_cast<float*>(copy.device.data);
      // The kernel stores the ids in the pinned buffer itself (the device reaches page-locked
      // memory at its host address): no copy behind it.
      auto* out = static_cast<int32_t*>(ids_host_.data());
      if (ids->drawn) {
        draw_tokens(x, ids->rows, ids->row, static_cast<const RowDraw*>(draws_device_.data()),
                    static_cast<const LogitEdit*>(edits_device_.data()), out, l);
      } else {
        row_argmax(x, ids->rows, ids->row, out, l);
      }
    } else {
      s = device_.copy_to_host(copy.host.data(), copy.device.data, copy.host.bytes());
    }
    if (!s) return s;
  }
  s = device_.copy_to_host(fault_host_.data(), device_.fault(), sizeof(FaultRecord));
  if (!s) return s;
  s = device_.synchronize(plan_.graph.name.c_str());
  if (!s) return s;
  return read_faults();
}

// Every launch's arguments are fixed at bind time (pointers into the arena, the state and
// the slot buffers; data-dependent values are read on the device), so the body is the same
// work each run: captured once, replayed as one graph.
Status CudaExecutor::run_body() {
  if (device_.profiling()) return run_timed();
  if (!staging_.empty()) return enqueue_body();  // the host ranks' sums wait for the device mid-step: no graph
  if (body_graph_ == nullptr) {
    Status s = device_.begin_capture();
    if (s) s = enqueue_body();
    Result<void*> g = device_.end_capture();  // ends the capture even after a failed launch
    if (!s) {
      if (g) Device::destroy_graph(*g);
      return s;
    }
    if (!g) return g.take_error();
    body_graph_ = *g;
  }
  return device_.launch_graph(body_graph_);
}

std::string CudaExecutor::label(const Op& op) const {
  const plan::KernelRequest& r = plan_.requests[static_cast<size_t>(op.eqn)];
  if (op.grouped > 0) {
    const int then = op.group.then.tasks;
    return str_cat(r.kernel, " group of ", op.grouped, then > 0 ? str_cat(" then rope/cache-write pack of ", then) : "");
  }
  if (op.decode_kernel) return "attention.decode_kernel";
  if (op.pack.tasks > 0) return str_cat("rope/cache-write pack of ", op.pack.tasks);
  if (op.chain > 0) return str_cat("pointwise chain of ", op.chain);
  if (op.validation >= 0) return str_cat("check of validation ", op.validation);
  return r.kernel;
}

std::vector<std::string> CudaExecutor::launch_labels() const {
  std::vector<std::string> out;
  for (const Op& op : body_) out.push_back(label(op));
  return out;
}

Status CudaExecutor::run_timed() {
  Status start = enqueue_step_start();
  if (!start) return start;
  for (const Op& op : body_) {
    Status s = device_.time_begin();
    if (s) s = launch(op);
    const std::string kernel = label(op);
    if (s) s = device_.time_end(kernel);
    if (!s) return s.take_error().context(plan_.graph.name, " eqn ", op.eqn);
  }
  return {};
}

// The sum over the group's ranks of the eqn's input, into its output: on the device by a
// device group (enqueued on the stream), else through the pinned rows that host ranks sum.
Status CudaExecutor::all_reduce(const Op& op) {
  const int64_t bytes = op.out.numel * 4;
  if (group_->on_device()) {
    Status s = device_.copy_on_device(op.out.data, op.in[0].data, bytes);
    if (!s) return s;
    return group_->all_reduce_sum_device(static_cast<float*>(op.out.data), static_cast<size_t>(op.out.numel),
                                         device_.stream());
  }
  Status s = device_.copy_to_host(op.staged, op.in[0].data, bytes);
  if (s) s = device_.synchronize("all_reduce");
  if (s) s = group_->all_reduce_sum(std::span<float>(op.staged, static_cast<size_t>(op.out.numel)));
  if (!s) return s;
  return device_.copy_to_device(op.out.data, op.staged, bytes);
}

std::span<const float> CudaExecutor::output(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) return {};
  const Buffer& host = it->second.host;
  return {static_cast<const float*>(host.data()), static_cast<size_t>(host.bytes() / 4)};
}

}  // namespace kvf::exec::cuda::step
