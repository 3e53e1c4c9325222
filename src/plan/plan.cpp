#include "plan/plan.h"

#include <map>

#include "ir/printer.h"
#include "plan/attention_schedule.h"
#include "plan/mask_form.h"
#include "plan/selected_attention_schedule.h"

namespace kvf::plan {
namespace {

Result<AttentionRequest> attention_request(const ir::Graph& g, const ir::Eqn& e, const DeviceCaps& caps) {
  const ir::AttnParams& p = e.params.attn;
  const Shape& q = g.type(e.in[0]).shape;
  const ir::TensorType& k = g.type(e.in[1]);
  const Shape& v = g.type(e.in[2]).shape;
  AttentionRequest r;
  r.batch = q[0];
  r.hq = q[1];
  r.lq = q[2];
  if (p.has_read) {  // pools [S, Hkv, D] and the read map [B, Lk], the last operand
    r.pool_rows = k.shape[0];
    r.hkv = k.shape[1];
    r.lk = g.type(e.in.back()).shape[1];
    r.dk = k.shape[2];
    r.dv = v[2];
  } else {
    r.hkv = k.shape[1];
    r.lk = k.shape[2];
    r.dk = k.shape[3];
    r.dv = v[3];
  }
  r.kv_dtype = k.dtype;
  r.scale = p.scale;
  r.softcap = p.softcap;
  size_t next = 3;
  if (p.has_shared) r.ds = g.type(e.in[next++]).shape.back();  // [B, 1, Lk, s], or the pool [S, 1, s]
  if (p.has_mask) {
    const Shape& m = g.type(e.in[next++]).shape;
    r.mask = m[1] == 1 ? MaskKind::kShared : MaskKind::kPerHead;
    r.mask_batch = m[0];
    if (!p.has_read) r.causal_pos = causal_positions(g, e.in[next - 1]);
  }
  r.live_len = p.has_len;
  Status s = choose_attention_schedule(r, caps);
  if (!s) return s.take_error();
  return r;
}

std::string kernel_name(const ir::Graph& g, const ir::Eqn& e) {
  if (e.op == ir::OpKind::kTranspose && is_alias(g, e)) return "transpose.alias";
  switch (e.op) {
    case ir::OpKind::kLinear: return str_cat("linear.", dtype_name(g.type(e.in[1]).dtype));
    case ir::OpKind::kReshape: return "reshape.alias";
    case ir::OpKind::kDynamicUpdateSlice:
    case ir::OpKind::kScatterUpdate:
      return str_cat(ir::op_name(e.op), g.value(e.in[0]).kind == ir::ValueKind::kState ? ".in_place" : ".copy");
    default: return std::string(ir::op_name(e.op));
  }
}

}  // namespace

std::vector<bool> gathered_in_stored_type(const ir::Graph& g) {
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    for (ir::ValueId v : g.eqns[e].in) users[static_cast<size_t>(v)].push_back(static_cast<int>(e));
  }
  std::vector<bool> lazy(g.eqns.size(), false);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const ir::Eqn& e = g.eqns[i];
    if (e.op != ir::OpKind::kCast || e.params.dtype != DType::kF32) continue;
    if (g.value(e.in[0]).kind != ir::ValueKind::kConstant) continue;
    const auto& us = users[static_cast<size_t>(e.out)];
    bool only_gathers = !us.empty();
    for (int u : us) {
      const ir::Eqn& ue = g.eqns[static_cast<size_t>(u)];
      only_gathers = only_gathers && ue.op == ir::OpKind::kGather && ue.in[0] == e.out && ue.in[1] != e.out;
    }
    lazy[i] = only_gathers;
  }
  return lazy;
}

ir::Graph colocate_linears(ir::Graph g) {
  constexpr size_t kMaxGroup = 3;  // q, k, v
  const size_t n = g.eqns.size();
  auto weight_dtype = [&](const ir::Eqn& e) { return g.type(e.in[1]).dtype; };
  auto movable_linear = [&](const ir::Eqn& e) {  // operands: x, then constants
    if (e.op != ir::OpKind::kLinear) return false;
    for (size_t k = 1; k < e.in.size(); ++k) {
      if (g.value(e.in[k]).kind != ir::ValueKind::kConstant) return false;
    }
    return true;
  };
  std::vector<bool> placed(n, false);
  std::vector<size_t> order;
  order.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (placed[i]) continue;
    placed[i] = true;
    order.push_back(i);
    const ir::Eqn& e = g.eqns[i];
    if (!movable_linear(e)) continue;
    std::vector<size_t> group{i};
    for (size_t j = i + 1; j < n && group.size() < kMaxGroup; ++j) {
      const ir::Eqn& f = g.eqns[j];
      if (!placed[j] && movable_linear(f) && f.in[0] == e.in[0] && weight_dtype(f) == weight_dtype(e)) {
        group.push_back(j);
        placed[j] = true;
        order.push_back(j);
      }
    }
    if (group.size() < 2) continue;
    for (size_t j = group.back() + 1; j < n; ++j) {  // a gated unit over the first two
      const ir::Eqn& f = g.eqns[j];
      if (!placed[j] && f.op == ir::OpKind::kGlu && f.in[0] == g.eqns[group[0]].out && f.in[1] == g.eqns[group[1]].out) {
        placed[j] = true;
        order.push_back(j);
        break;
      }
    }
  }
  std::vector<ir::Eqn> eqns;
  eqns.reserve(n);
  for (size_t i : order) eqns.push_back(std::move(g.eqns[i]));
  g.eqns = std::move(eqns);
  for (size_t i = 0; i < n; ++i) g.values[static_cast<size_t>(g.eqns[i].out)].producer = static_cast<int>(i);
  return g;
}

Result<Plan> make_plan(ir::Graph g, const DeviceCaps& caps) {
  if (caps.target == Target::kCuda) g = colocate_linears(std::move(g));
  Plan p;
  p.caps = caps;
  std::vector<int64_t> scratch(g.eqns.size(), 0);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const ir::Eqn& e = g.eqns[i];
    KernelRequest r{static_cast<int>(i), e.op, kernel_name(g, e), {}, {}};
    if (e.op == ir::OpKind::kAttention) {
      Result<AttentionRequest> a = attention_request(g, e, caps);
      if (!a) return a.take_error().context("plan ", g.name, " eqn ", i);
      r.attention = *a;
      r.kernel = a->schedule == AttentionSchedule::kSplitKV ? "attention.split_kv"
                 : a->schedule == AttentionSchedule::kTiles ? "attention.tiles"
                                                            : "attention.streaming";
      scratch[i] = a->scratch_floats * 4;
    }
    if (e.op == ir::OpKind::kSelectedAttention) {  // attention's request over the eqn's attention operands
      ir::Eqn view = e;
      view.op = ir::OpKind::kAttention;
      view.in.resize(e.in.size() - 2);
      Result<AttentionRequest> a = attention_request(g, view, caps);
      if (!a) return a.take_error().context("plan ", g.name, " eqn ", i);
      r.attention = *a;
      const int64_t mask_heads = e.params.attn.has_mask ? (a->mask == MaskKind::kPerHead ? a->hq : 1) : 0;
      scratch[i] = caps.target == Target::kCuda
                       ? gpu_selected_attention_scratch_bytes(a->batch, a->lq, a->lk, mask_heads)
                       : selected_attention_scratch(a->hq, a->lk, a->dk + a->ds, a->dv, mask_heads).total * 4;
    }
    if (e.op == ir::OpKind::kMoe) {
      const Shape& x = g.type(e.in[0]).shape;
      const int64_t dim = x.back(), rows = numel(x) / dim, experts = g.type(e.in[1]).shape.back();
      r.moe = choose_moe_schedule(rows, dim, g.type(e.in[2]).shape[0], experts, g.type(e.in[2]).dtype,
                                  g.type(e.in.back()).dtype, caps);
      if (caps.target == Target::kCuda) r.kernel = r.moe.gathered ? "moe.gathered" : "moe.direct";
      scratch[i] = r.moe.scratch_floats * 4;
    }
    if (e.op == ir::OpKind::kLora) {
      const int64_t rows = numel(g.type(e.in[5]).shape), in = g.type(e.in[0]).shape.back();
      scratch[i] = lora_scratch_floats(rows, in, g.type(e.in[2]).shape[1] / in, caps.target) * 4;
    }
    p.requests.push_back(std::move(r));
  }
  Result<BufferPlan> b = plan_buffers(g, scratch);
  if (!b) return b.take_error().context("plan ", g.name);
  p.buffers = std::move(*b);
  p.graph = std::move(g);
  return p;
}

std::string describe(const Plan& p) {
  std::string s = str_cat("plan ", p.graph.name, " on ", describe(p.caps), "\n");
  for (const KernelRequest& r : p.requests) {
    if (r.op != ir::OpKind::kAttention) continue;
    s += str_cat("  ", ir::value_ref(p.graph, p.graph.eqns[static_cast<size_t>(r.eqn)].out), ": ",
                 describe(r.attention), "\n");
  }
  std::map<std::string, int> kernels;
  for (const KernelRequest& r : p.requests) ++kernels[r.kernel];
  s += "  kernels:";
  for (const auto& [name, n] : kernels) s += str_cat(" ", name, "x", n);
  s += str_cat("\n  arena: ", p.buffers.arena_bytes, " bytes peak (", p.buffers.naive_bytes,
               " without reuse)\n");
  return s;
}

}  // namespace kvf::plan
