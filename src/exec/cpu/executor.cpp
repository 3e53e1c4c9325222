#include "exec/cpu/executor.h"

#include <cstring>

#include "exec/attention_operands.h"
#include "exec/cpu/attention.h"
#include "exec/cpu/indexer_scores.h"
#include "exec/cpu/kernels_generic.h"
#include "exec/cpu/kernels_rows.h"
#include "exec/cpu/linear.h"
#include "exec/cpu/lora.h"
#include "exec/cpu/moe.h"
#include "exec/cpu/selection.h"
#include "exec/step_checks.h"
#include "ir/printer.h"

namespace kvf::exec::cpu {

using ir::OpKind;
using ir::ValueKind;

namespace {

Ref ref_of(void* data, const ir::TensorType& t) { return Ref{data, t, numel(t.shape)}; }

AttentionSchedule kernel_schedule(const plan::AttentionRequest& r) {
  AttentionSchedule s;
  if (r.schedule == plan::AttentionSchedule::kSplitKV) {
    s.kind = AttentionScheduleKind::kSplitKV;
    s.splits = r.splits;
    s.chunk = r.chunk;
  }
  return s;
}

Status check_fused(const ir::Graph& g, const ir::Eqn& e) {
  const bool attention = e.op == OpKind::kAttention || e.op == OpKind::kSelectedAttention;
  const size_t selected_at = e.op == OpKind::kSelectedAttention ? e.in.size() - 2 : e.in.size();
  for (size_t i = 0; i < e.in.size(); ++i) {
    const ir::ValueId v = e.in[i];
    const DType dt = g.type(v).dtype;
    const bool weight = (e.op == OpKind::kLinear && i == 1) || (e.op == OpKind::kMoe && i >= 2);
    const bool keys = (attention && v != e.in[0]) || (e.op == OpKind::kIndexerScores && i == 1);
    const bool kv = keys && dt == DType::kF16;
    const bool factors = e.op == OpKind::kLora && (i == 2 || i == 3) && dt == DType::kF16;
    const bool selection = i == selected_at && dt == DType::kBool;
    if (dt != DType::kF32 && dt != DType::kI32 && !weight && !kv && !factors && !selection) {
      return unsupported("exec/cpu: ", ir::op_name(e.op), " over ", ir::type_str(g.type(v)));
    }
  }
  const DType out = e.op == OpKind::kBlockTopK ? DType::kBool : DType::kF32;
  if (g.type(e.out).dtype != out) return unsupported("exec/cpu: ", ir::op_name(e.op), " to ", ir::type_str(g.type(e.out)));
  if (attention && e.params.attn.has_read) {
    // The kernel reads the pools at the map's words unchecked: only a read-map slot declared
    // over the pool's rows, which run() checks (ir::check_slot) before anything runs, may
    // name them.
    const ir::ValueId read_map = e.op == OpKind::kSelectedAttention ? e.in[e.in.size() - 3] : e.in.back();
    const ir::Value& read = g.value(read_map);
    const int64_t rows = g.type(e.in[1]).shape[0];
    if (read.kind != ValueKind::kSlot || read.slot != ir::Slot::kSlotMap || read.slot_bound != rows) {
      return unsupported("exec/cpu: paged attention reads its pools through ", ir::value_ref(g, read_map),
                         ", not a read-map slot declared over the pool's ", rows, " rows");
    }
  }
  return {};
}

}  // namespace

CpuExecutor::CpuExecutor(plan::Plan plan, StateStore& state, ThreadPool& pool, AttentionBackend* attention,
                         WeightPacking packing, Collective* group)
    : plan_(std::move(plan)), state_(state), pool_(pool), attention_(attention), packing_(packing), group_(group) {}

Result<std::unique_ptr<CpuExecutor>> CpuExecutor::create(plan::Plan plan, StateStore& state, ThreadPool& pool,
                                                         AttentionBackend* attention, WeightPacking packing,
                                                         Collective* group) {
  Status s = ir::check_group(plan.graph, group, "exec/cpu");
  if (!s) return s.take_error();
  std::unique_ptr<CpuExecutor> ex(new CpuExecutor(std::move(plan), state, pool, attention, packing, group));
  s = state.allocate(ex->plan_.graph);
  if (!s) return s.take_error();
  s = ex->bind_values();
  if (!s) return s.take_error().context("exec/cpu ", ex->plan_.graph.name);
  s = ex->bind_ops();
  if (!s) return s.take_error().context("exec/cpu ", ex->plan_.graph.name);
  return ex;
}

Status CpuExecutor::bind_values() {
  const ir::Graph& g = plan_.graph;
  const int64_t available = host_memory().available_bytes();
  if (available >= 0 && plan_.buffers.arena_bytes > available) {
    return capacity("the step's arena needs ", plan_.buffers.arena_bytes, " bytes, the host has ", available,
                    " available; fewer tokens per step or a smaller --ctx");
  }
  arena_ = HostBuffer(plan_.buffers.arena_bytes);
  refs_.resize(g.values.size());
  folded_.assign(g.values.size(), false);
  auto own = [&](const ir::TensorType& t) {
    owned_.emplace_back(numel(t.shape) * std::max<int64_t>(plan::element_bytes(t.dtype), 1));
    return owned_.back().data();
  };
  for (size_t i = 0; i < g.values.size(); ++i) {
    const ir::Value& v = g.values[i];
    switch (v.kind) {
      case ValueKind::kSlot:
        refs_[i] = ref_of(own(v.type), v.type);
        slots_.push_back({v.slot, refs_[i]});
        break;
      case ValueKind::kLiteral: {
        refs_[i] = ref_of(own(v.type), v.type);
        if (v.type.dtype == DType::kF32) *refs_[i].f32() = static_cast<float>(v.literal);
        else if (v.type.dtype == DType::kI32) *refs_[i].i32() = static_cast<int32_t>(v.literal);
        else if (v.type.dtype == DType::kBool) *refs_[i].pred() = v.literal != 0;
        else return unsupported("literal of ", dtype_name(v.type.dtype));
        folded_[i] = true;
        break;
      }
      case ValueKind::kConstant: {
        HostTensor t = v.data;
        if (!t.is_contiguous()) {
          Result<HostTensor> c = t.contiguous();
          if (!c) return c.take_error().context("constant ", v.name);
          t = std::move(*c);
        }
        refs_[i] = ref_of(const_cast<void*>(t.raw()), v.type);
        pinned_.push_back(std::move(t));
        folded_[i] = true;
        break;
      }
      case ValueKind::kState: {
        StateBuffer* sb = state_.find(v.name);
        if (sb == nullptr) return internal_error("state ", v.name, " was not allocated");
        refs_[i] = ref_of(sb->buf.data(), v.type);
        break;
      }
      case ValueKind::kIntermediate: break;
    }
  }
  return {};
}

Status CpuExecutor::bind_ops() {
  const ir::Graph& g = plan_.graph;
  const std::vector<bool> lazy = plan::gathered_in_stored_type(g);
  const std::vector<bool> in_prelude = validation_prelude(g);
  int attentions = 0;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const ir::Eqn& e = g.eqns[i];
    const auto out = static_cast<size_t>(e.out);
    const ir::TensorType& ot = g.type(e.out);
    Op op{static_cast<int>(i), {}, {}, nullptr};
    bool constant_inputs = true;
    for (ir::ValueId v : e.in) {
      op.in.push_back(refs_[static_cast<size_t>(v)]);
      constant_inputs = constant_inputs && folded_[static_cast<size_t>(v)];
    }
    if (lazy[i]) {
      refs_[out] = refs_[static_cast<size_t>(e.in[0])];
      folded_[out] = true;
      continue;
    }
    const ir::ValueId owner = plan_.buffers.storage_of[out];
    if (owner != e.out) {
      refs_[out] = ref_of(refs_[static_cast<size_t>(owner)].data, ot);
      folded_[out] = folded_[static_cast<size_t>(owner)];
      if (plan::is_alias(g, e)) continue;  // nothing to run
    } else if (constant_inputs || in_prelude[i]) {
      // Folded values outlive the arena's reuse; prelude values run out of eqn order.
      owned_.emplace_back(numel(ot.shape) * std::max<int64_t>(plan::element_bytes(ot.dtype), 1));
      refs_[out] = ref_of(owned_.back().data(), ot);
    } else {
      refs_[out] = ref_of(static_cast<char*>(arena_.data()) + plan_.buffers.offset[out], ot);
    }
    op.out = refs_[out];
    if (plan_.buffers.scratch_offset[i] >= 0) {
      op.scratch = reinterpret_cast<float*>(static_cast<char*>(arena_.data()) + plan_.buffers.scratch_offset[i]);
    }
    Status s;
    if (ir::is_fused(e.op)) {
      s = check_fused(g, e);
    } else {
      std::vector<ir::TensorType> types;
      for (ir::ValueId v : e.in) types.push_back(g.type(v));
      s = check_primitive(e, types, ot);
    }
    if (s && e.op == OpKind::kAttention && attention_ != nullptr) {
      op.placed = attentions;
      s = attention_->check(plan_.requests[i].attention, attentions);
      if (!s) s = s.take_error().context("placed attention ", attentions);
    }
    if (e.op == OpKind::kAttention) ++attentions;
    if (!s) return s.take_error().context("eqn ", i);
    if (e.op == OpKind::kMoe) {  // the weights' views, once, not per step
      for (size_t k = 2; k < op.in.size(); ++k) {
        op.experts.push_back({op.in[k].dtype(), op.in[k].data, op.in[k].dim(0), op.in[k].dim(1)});
      }
    }
    // Weights-only work happens once, here; never a collective, which every rank makes in
    // step order.
    if (constant_inputs && owner == e.out && !ir::is_collective(e.op)) {
      s = run_op(op);
      if (!s) return s.take_error().context("folding eqn ", i);
      folded_[out] = true;
      continue;
    }
    if (in_prelude[i] && ir::is_fused(e.op)) return internal_error("a validation depends on fused eqn ", i);
    if (e.op == OpKind::kLinear && packing_ == WeightPacking::kAhead) {
      const Ref& w = op.in[1];
      op.packed = pack_weights(pool_, WeightView{w.dtype(), w.data, w.dim(0), w.dim(1)}, op.in[0].numel / w.dim(1));
    }
    (in_prelude[i] ? prelude_ : body_).push_back(std::move(op));
  }
  return {};
}

Status CpuExecutor::run_op(const Op& op) {
  const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
  switch (e.op) {
    case OpKind::kLinear: {
      const Ref& x = op.in[0];
      const Ref& w = op.in[1];
      const WeightView wv{w.dtype(), w.data, w.dim(0), w.dim(1)};
      const float* bias = e.params.has_bias ? op.in[2].f32() : nullptr;
      linear(pool_, x.f32(), x.numel / wv.k, wv.k, wv, bias, op.out.f32(), wv.n, op.packed.get());
      return {};
    }
    case OpKind::kAttention: {
      const plan::AttentionRequest& r = plan_.requests[static_cast<size_t>(op.eqn)].attention;
      if (op.placed >= 0) {
        Status s = attention_->run(attention_operands(e.params.attn, r, op.in, op.out.data), op.placed);
        if (!s) return s.take_error().context("placed attention ", op.placed);
        return {};
      }
      attention(pool_, attention_operands(e.params.attn, r, op.in, op.out.data), kernel_schedule(r), op.scratch);
      return {};
    }
    case OpKind::kRmsNorm: rmsnorm_rows(pool_, op.in[0], op.in[1], e.params.eps, e.params.unit_offset, op.out); return {};
    case OpKind::kRope: rope_rows(pool_, op.in[0], op.in[1], op.in[2], e.params.rope, op.out); return {};
    case OpKind::kSoftmax: softmax_rows(pool_, op.in[0], op.out); return {};
    case OpKind::kGlu: glu(pool_, e.params.glu, op.in[0], op.in[1], op.out); return {};
    case OpKind::kMoe: run_moe(e, op); return {};
    case OpKind::kLora: run_lora(op); return {};
    case OpKind::kAllReduce: return run_all_reduce(op);
    case OpKind::kBlockTopK: {
      const Ref& s = op.in[0];
      block_topk(pool_, {.scores = s.f32(), .pos = op.in[1].i32(), .rows = s.dim(0) * s.dim(1), .blocks = s.dim(2),
                         .topk = e.params.topk, .ratio = e.params.ratio, .out = op.out.pred()});
      return {};
    }
    case OpKind::kIndexerScores: {
      const Ref &q = op.in[0], &k = op.in[1];
      indexer_scores(pool_, {.q = q.f32(), .k = k.data, .k_type = k.dtype(), .w = op.in[2].f32(), .rows = q.dim(0),
                             .heads = q.dim(1), .n = q.dim(2), .dim = q.dim(3), .keys = k.dim(2),
                             .scale = static_cast<float>(e.params.scale), .out = op.out.f32()});
      return {};
    }
    case OpKind::kSelectedAttention: {
      const plan::AttentionRequest& r = plan_.requests[static_cast<size_t>(op.eqn)].attention;
      const Ref& sel = op.in[op.in.size() - 2];
      selected_attention(pool_, {.attn = attention_operands(e.params.attn, r, op.in, op.out.data), .selected = sel.pred(),
                                 .pos = op.in.back().i32(), .blocks = sel.dim(2), .ratio = e.params.ratio},
                         op.scratch);
      return {};
    }
    default: return run_primitive(e, op.in, op.out, pool_);
  }
}

void CpuExecutor::run_moe(const ir::Eqn& e, const Op& op) {
  const size_t experts = op.experts.size() / 3;
  const std::span<const WeightView> all(op.experts);
  const int64_t dim = op.in[0].shape().back();
  moe(pool_, {.x = op.in[0].f32(), .weights = op.in[1].f32(), .rows = op.in[0].numel / dim, .dim = dim,
              .ffn = all.front().n, .gate = all.subspan(0, experts), .up = all.subspan(experts, experts),
              .down = all.subspan(2 * experts, experts), .act = e.params.glu, .out = op.out.f32(), .scratch = op.scratch});
}

void CpuExecutor::run_lora(const Op& op) {
  const Ref &x = op.in[0], &y = op.in[1], &a = op.in[2];
  const int64_t in = x.shape().back(), out = y.shape().back();
  lora(pool_, {.y = y.f32(), .x = x.f32(), .rows = op.in[5].numel, .in = in, .out = out, .rank = a.dim(1) / in,
               .adapters = a.dim(0), .factors = a.dtype(), .a = a.data, .b = op.in[3].data, .s = op.in[4].f32(),
               .ids = op.in[5].i32(), .result = op.out.f32(), .scratch = op.scratch});
}

Status CpuExecutor::run_all_reduce(const Op& op) {
  const Ref &x = op.in[0], &out = op.out;
  if (out.data != x.data) std::memcpy(out.data, x.data, static_cast<size_t>(x.numel) * sizeof(float));
  return group_->all_reduce_sum(std::span<float>(out.f32(), static_cast<size_t>(out.numel)));
}

Status CpuExecutor::run(const SlotValues& slots) {
  Status checked = check_slots(plan_.graph, slots);  // every slot checked before any is copied in
  if (!checked) return checked;
  for (auto& [slot, ref] : slots_) {
    const std::vector<int32_t>& words = slots.at(slot);
    std::memcpy(ref.data, words.data(), words.size() * sizeof(int32_t));
  }
  for (const Op& op : prelude_) {
    Status s = run_op(op);
    if (!s) return s;
  }
  for (const ir::Validation& c : plan_.graph.validations) {
    const Ref& w = refs_[static_cast<size_t>(c.witness)];
    for (int64_t i = 0; i < w.numel; ++i) {
      if (!w.pred()[i]) return validation_failed(plan_.graph, c, i);
    }
  }
  for (const Op& op : body_) {
    Status s = run_op(op);
    if (!s) return s.take_error().context(plan_.graph.name, " eqn ", op.eqn);
  }
  return {};
}

std::span<const float> CpuExecutor::output(const std::string& name) const {
  const ir::ValueId id = plan_.graph.find_output(name);
  if (id < 0 || plan_.graph.type(id).dtype != DType::kF32) return {};
  const Ref& r = refs_[static_cast<size_t>(id)];
  return {r.f32(), static_cast<size_t>(r.numel)};
}

}  // namespace kvf::exec::cpu
