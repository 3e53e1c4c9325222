// The jaxpr-like printer.
#include "ir/printer.h"

#include <cmath>
#include <cstdio>

namespace kvf::ir {
namespace {

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string tuple(const std::vector<int64_t>& xs) {
  std::string s = "(";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? "," : "") + std::to_string(xs[i]);
  return s + ")";
}

std::string attention_params(const AttnParams& a) {
  return str_cat("[scale=", number(a.scale), ", n_rep=", a.n_rep, a.softcap > 0 ? ", softcap=" + number(a.softcap) : "",
                 a.has_shared ? ", split_key" : "", a.has_mask ? ", mask" : "", a.has_len ? ", live_len" : "",
                 a.has_read ? ", paged_key" : "", "]");
}

const char* glu_name(GluAct act) {
  switch (act) {
    case GluAct::kSilu: return "silu";
    case GluAct::kGeluTanh: return "gelu_tanh";
    case GluAct::kGeluErf: return "gelu_erf";
  }
  return "?";
}

std::string params_str(const Eqn& e) {
  const Params& p = e.params;
  switch (e.op) {
    case OpKind::kCompare: return str_cat("[dir=", cmp_name(p.cmp), "]");
    case OpKind::kReduceSum:
    case OpKind::kReduceMax: return str_cat("[axes=", tuple(p.axes), p.keepdim ? ", keepdim" : "", "]");
    case OpKind::kReshape:
    case OpKind::kBroadcast: return str_cat("[shape=", tuple(p.shape), "]");
    case OpKind::kTranspose: return str_cat("[perm=", tuple(p.axes), "]");
    case OpKind::kSlice: {
      bool unit = true;
      for (int64_t s : p.steps) unit = unit && s == 1;
      return str_cat("[starts=", tuple(p.starts), ", limits=", tuple(p.limits),
                     unit ? "" : str_cat(", steps=", tuple(p.steps)), "]");
    }
    case OpKind::kConcat:
    case OpKind::kDynamicUpdateSlice: return str_cat("[axis=", p.axis, "]");
    case OpKind::kIota: return str_cat("[shape=", tuple(p.shape), ", axis=", p.axis, ", dtype=", dtype_name(p.dtype), "]");
    case OpKind::kCast: return str_cat("[dtype=", dtype_name(p.dtype), "]");
    case OpKind::kAttention: return attention_params(p.attn);
    case OpKind::kRope:
      return str_cat("[layout=", p.rope.layout == RopeLayout::kHalf ? "half" : "interleaved",
                     ", rot=", p.rope.rotary_dim, p.rope.token_axis == -2 ? "" : str_cat(", tokens=", p.rope.token_axis), "]");
    case OpKind::kRmsNorm: return str_cat("[eps=", number(p.eps), p.unit_offset ? ", unit_offset" : "", "]");
    case OpKind::kGlu:
    case OpKind::kMoe: return str_cat("[act=", glu_name(p.glu), "]");
    case OpKind::kLinear: return p.has_bias ? "[bias]" : "";
    case OpKind::kBlockTopK: return str_cat("[k=", p.topk, ", ratio=", p.ratio, "]");
    case OpKind::kIndexerScores: return str_cat("[scale=", number(p.scale), "]");
    case OpKind::kSelectedAttention: {
      const std::string a = attention_params(p.attn);
      return str_cat(a.substr(0, a.size() - 1), ", ratio=", p.ratio, "]");  // attention's, one more
    }
    default: return "";
  }
}

}  // namespace

std::string value_ref(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  if (v.kind == ValueKind::kLiteral) return str_cat(number(v.literal), ":", dtype_name(v.type.dtype));
  if (!v.name.empty()) return v.kind == ValueKind::kIntermediate ? "%" + v.name : v.name;
  // Unnamed intermediates are numbered by their eqn, so the text does not depend on how
  // many literals or leaves were created in between.
  return str_cat("%", v.producer >= 0 ? v.producer : id);
}

std::string eqn_str(const Graph& g, const Eqn& e) {
  std::string out = str_cat(value_ref(g, e.out), ":", type_str(g.type(e.out)), " = ", op_name(e.op), params_str(e));
  for (ValueId v : e.in) out += " " + value_ref(g, v);
  return out;
}

std::string print(const Graph& g) {
  std::string out = str_cat("{ graph ", g.name, " ;");
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    if (v.kind == ValueKind::kConstant || v.kind == ValueKind::kState) {
      out += str_cat(" ", v.name, ":", type_str(v.type));
    }
  }
  out += " ;";
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    if (v.kind == ValueKind::kSlot) {
      out += str_cat(" ", v.name, ":", type_str(v.type));
      if (v.slot_bound > 0) out += str_cat("<", v.slot_bound);  // a paged map over that many pool slots
    }
  }
  out += " .\n";
  for (const Eqn& e : g.eqns) out += str_cat("  ", eqn_str(g, e), "\n");
  for (const Output& o : g.outputs) out += str_cat("  out ", o.name, " = ", value_ref(g, o.value), "\n");
  for (const Donation& d : g.donations) {
    out += str_cat("  donate ", value_ref(g, d.state_in), " <- ", value_ref(g, d.state_out), "\n");
  }
  for (const Validation& c : g.validations) {
    out += str_cat("  check ", value_ref(g, c.witness), " \"", c.what, "\"\n");
  }
  return out + "}\n";
}

}  // namespace kvf::ir
