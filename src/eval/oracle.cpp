// Oracle run loop: bind, evaluate, round, free at last use, validate, publish.
#include "eval/oracle.h"

#include "ir/slot_check.h"

#include "eval/kernels.h"
#include "ir/printer.h"

namespace kvf::eval {

using ir::OpKind;
using ir::ValueKind;

Status allocate_state(const ir::Graph& g, StateStore& store) {
  for (const ir::Value& v : g.values) {
    if (v.kind != ValueKind::kState || store.count(v.name)) continue;
    Result<Buffer> b = Buffer::zeros(v.type.dtype, v.type.shape);
    if (!b) return b.take_error().context("state ", v.name);
    store.emplace(v.name, std::move(*b));
  }
  return {};
}

Oracle::Oracle(EvalOptions opts) : opts_(opts) {
  if (opts_.threads > 1) pool_ = std::make_unique<ThreadPool>(opts_.threads);
}

const Buffer* Oracle::constant(const ir::Value& v, Status& status) {
  auto key = std::make_tuple(v.data.raw(), v.data.dtype(), v.data.shape(), v.data.strides());
  auto it = constants_.find(key);
  if (it != constants_.end()) return &it->second.values;
  Result<Buffer> b = from_host(v.data);
  if (!b) {
    status = b.take_error().context("constant ", v.name);
    return nullptr;
  }
  return &constants_.emplace(key, Widened{v.data, std::move(*b)}).first->second.values;
}

// The sum over the group, in rank order in f64 (Collective::all_reduce_sum); rounded to the
// dtype afterwards like every eqn.
Result<Buffer> Oracle::all_reduce(const Buffer& x) {
  Buffer out = x;
  Status s = opts_.group->all_reduce_sum(std::span<double>(out.data));
  if (!s) return s.take_error();
  return out;
}

Result<Buffer> Oracle::eval_eqn(const ir::Graph& g, const ir::Eqn& e, std::span<const Buffer* const> in) {
  KernelArgs a{e, in, g.type(e.out), pool_.get(), opts_.precision == Precision::kNative};
  if (ir::is_unary(e.op)) return eval_unary(a);
  if (ir::is_binary(e.op)) return eval_binary(a);
  switch (e.op) {
    case OpKind::kSelect: return eval_select(a);
    case OpKind::kCast: return eval_cast(a);
    case OpKind::kIota: return eval_iota(a);
    case OpKind::kReduceSum: case OpKind::kReduceMax: return eval_reduce(a);
    case OpKind::kReshape: return eval_reshape(a);
    case OpKind::kTranspose: return eval_transpose(a);
    case OpKind::kBroadcast: return eval_broadcast(a);
    case OpKind::kSlice: return eval_slice(a);
    case OpKind::kConcat: return eval_concat(a);
    case OpKind::kGather: return eval_gather(a);
    case OpKind::kScatterUpdate: return eval_scatter_update(a);
    case OpKind::kDynamicUpdateSlice: return eval_dynamic_update_slice(a);
    case OpKind::kMatMul: return eval_matmul(a);
    case OpKind::kAllReduce: return all_reduce(*in[0]);
    case OpKind::kAttention: return eval_attention(a);
    case OpKind::kRope: return eval_rope(a);
    case OpKind::kRmsNorm: return eval_rmsnorm(a);
    case OpKind::kSoftmax: return eval_softmax(a);
    case OpKind::kGlu: return eval_glu(a);
    case OpKind::kLinear: return eval_linear(a);
    case OpKind::kMoe: return eval_moe(a);
    case OpKind::kLora: return eval_lora(a);
    case OpKind::kBlockTopK: return eval_block_topk(a);
    case OpKind::kSelectedAttention: return eval_selected_attention(a);
    case OpKind::kIndexerScores: return eval_indexer_scores(a);
    default: break;
  }
  return internal_error("oracle: no loop for ", ir::op_name(e.op));
}

namespace {

void round_in_place(Buffer& b) {
  if (!is_float(b.dtype)) return;
  for (double& x : b.data) x = round_to_dtype(b.dtype, x);
}

// Index of the last eqn that reads each value; values the graph exports never die.
std::vector<int> last_uses(const ir::Graph& g) {
  const int forever = static_cast<int>(g.eqns.size());
  std::vector<int> last(g.values.size(), -1);
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    for (ir::ValueId v : g.eqns[e].in) last[static_cast<size_t>(v)] = static_cast<int>(e);
  }
  for (const ir::Output& o : g.outputs) last[static_cast<size_t>(o.value)] = forever;
  for (const ir::Donation& d : g.donations) last[static_cast<size_t>(d.state_out)] = forever;
  for (const ir::Validation& c : g.validations) last[static_cast<size_t>(c.witness)] = forever;
  return last;
}

Status check_bound(const ir::Value& v, const Buffer& b, std::string_view what) {
  if (b.dtype != v.type.dtype || b.shape != v.type.shape) {
    return invalid_input(what, " ", v.name, ": bound ", dtype_name(b.dtype), shape_str(b.shape), ", graph expects ",
                         ir::type_str(v.type));
  }
  return {};
}

}  // namespace

Result<Outputs> Oracle::run(const ir::Graph& g, const SlotBindings& slots, StateStore& state) {
  const bool round = opts_.precision == Precision::kNative;
  Status grouped = ir::check_group(g, opts_.group, "oracle");
  if (!grouped) return grouped.take_error();
  std::vector<Buffer> owned(g.values.size());
  std::vector<const Buffer*> env(g.values.size(), nullptr);
  for (size_t i = 0; i < g.values.size(); ++i) {
    const ir::Value& v = g.values[i];
    Status s;
    switch (v.kind) {
      case ValueKind::kSlot: {
        auto it = slots.find(v.slot);
        if (it == slots.end()) return invalid_input("graph ", g.name, " needs slot ", v.name, " but none was bound");
        s = check_bound(v, it->second, "slot");
        if (s && v.slot_bound > 0) {
          std::vector<int32_t> words(it->second.data.begin(), it->second.data.end());
          s = ir::check_slot(v, words);
        }
        env[i] = &it->second;
        break;
      }
      case ValueKind::kState: {
        auto it = state.find(v.name);
        if (it == state.end()) return invalid_input("graph ", g.name, " needs state ", v.name, " but none was allocated");
        s = check_bound(v, it->second, "state");
        env[i] = &it->second;
        break;
      }
      case ValueKind::kConstant: env[i] = constant(v, s); break;
      case ValueKind::kLiteral:
        owned[i].dtype = v.type.dtype;
        owned[i].data = {round ? round_to_dtype(v.type.dtype, v.literal) : v.literal};
        env[i] = &owned[i];
        break;
      case ValueKind::kIntermediate: break;
    }
    if (!s) return s.take_error().context("running ", g.name);
  }

  const std::vector<int> last = last_uses(g);
  for (size_t e = 0; e < g.eqns.size(); ++e) {
    const ir::Eqn& eq = g.eqns[e];
    std::vector<const Buffer*> in;
    for (ir::ValueId v : eq.in) in.push_back(env[static_cast<size_t>(v)]);
    Result<Buffer> r = eval_eqn(g, eq, in);
    if (!r) return r.take_error().context("running ", g.name, " eqn ", e, " (", ir::value_ref(g, eq.out), ")");
    if (round) round_in_place(*r);
    owned[static_cast<size_t>(eq.out)] = std::move(*r);
    env[static_cast<size_t>(eq.out)] = &owned[static_cast<size_t>(eq.out)];
    for (ir::ValueId v : eq.in) {
      if (last[static_cast<size_t>(v)] == static_cast<int>(e) && g.value(v).kind == ValueKind::kIntermediate) {
        owned[static_cast<size_t>(v)] = Buffer{};  // dead: free it
      }
    }
  }

  // The validation channel: one false element anywhere and nothing is published.
  for (const ir::Validation& c : g.validations) {
    const Buffer& w = *env[static_cast<size_t>(c.witness)];
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (w.data[static_cast<size_t>(i)] == 0) {
        return Error(ErrorCode::kValidation, str_cat("graph ", g.name, ": ", c.what, " does not hold (element ", i, ")"));
      }
    }
  }

  Outputs outputs;
  for (const ir::Output& o : g.outputs) outputs[o.name] = *env[static_cast<size_t>(o.value)];
  // Copy every donated value out before writing any back: one may alias another's state.
  std::vector<std::pair<std::string, Buffer>> published;
  for (const ir::Donation& d : g.donations) {
    published.emplace_back(g.value(d.state_in).name, *env[static_cast<size_t>(d.state_out)]);
  }
  for (auto& [name, buf] : published) state[name] = std::move(buf);
  return outputs;
}

}  // namespace kvf::eval
