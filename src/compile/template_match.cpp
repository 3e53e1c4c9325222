// Template unification (compile/template_match.h).
#include "compile/template_match.h"

#include <bit>
#include <unordered_map>

#include "compile/match.h"
#include "compile/passes.h"

namespace kvf::compile {

Result<Template> make_template(const std::vector<ir::TensorType>& inputs, const TemplateTrace& trace) {
  ir::Builder b("template");
  std::vector<ir::V> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(b.state(str_cat("template_in", i), inputs[i].dtype, inputs[i].shape));
  }
  b.output("root", trace(b, in));
  Result<ir::Graph> g = b.finish();
  if (!g) return g.take_error();
  for (const Pass& p : {canonicalize_pass(), cse_pass()}) {
    g = p.run(*g);
    if (!g) return g.take_error();
  }
  Template t;
  t.root = g->find_output("root");
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::ValueId id = -1;
    for (size_t v = 0; v < g->values.size(); ++v) {
      if (g->values[v].kind == ir::ValueKind::kState && g->values[v].name == str_cat("template_in", i)) {
        id = static_cast<ir::ValueId>(v);
      }
    }
    t.inputs.push_back(id);  // -1: the composition does not read this input
  }
  t.graph = std::move(*g);
  return t;
}

namespace {

class Unifier {
 public:
  Unifier(const Template& t, const ir::Graph& g) : t_(t), g_(g) {
    for (size_t i = 0; i < t.inputs.size(); ++i) {
      if (t.inputs[i] >= 0) input_index_[t.inputs[i]] = i;
    }
    bound_.assign(t.inputs.size(), -1);
  }

  bool same(ir::ValueId tv, ir::ValueId gv) {
    if (auto it = seen_.find(tv); it != seen_.end()) return it->second == gv;
    seen_.emplace(tv, gv);
    const ir::Value &a = t_.graph.value(tv), &b = g_.value(gv);
    if (a.type != b.type) return false;
    if (auto in = input_index_.find(tv); in != input_index_.end()) return bind(in->second, gv);
    // A chain of reshapes is one reshape of its source (row-major order throughout), and
    // canonicalize folds such chains by who reads them, which the template cannot see.
    const ir::ValueId ts = reshape_source(t_.graph, tv), gs = reshape_source(g_, gv);
    if (ts != tv || gs != gv) return same(ts, gs);
    if (a.kind != b.kind) return false;
    switch (a.kind) {
      case ir::ValueKind::kLiteral: return std::bit_cast<uint64_t>(a.literal) == std::bit_cast<uint64_t>(b.literal);
      case ir::ValueKind::kConstant: return a.name == b.name && a.data.raw() == b.data.raw();
      case ir::ValueKind::kIntermediate: return same_eqn(t_.graph.eqns[static_cast<size_t>(a.producer)],
                                                         g_.eqns[static_cast<size_t>(b.producer)]);
      default: return false;  // a slot or state the template did not declare as an input
    }
  }

  std::vector<ir::ValueId> bound() const { return bound_; }

 private:
  bool bind(size_t input, ir::ValueId gv) {
    if (bound_[input] >= 0) return bound_[input] == gv;
    bound_[input] = gv;
    return true;
  }

  bool same_eqn(const ir::Eqn& a, const ir::Eqn& b) {
    if (a.op != b.op || a.in.size() != b.in.size() || params_key(a.params) != params_key(b.params)) return false;
    for (size_t i = 0; i < a.in.size(); ++i) {
      if (!same(a.in[i], b.in[i])) return false;
    }
    return true;
  }

  const Template& t_;
  const ir::Graph& g_;
  std::unordered_map<ir::ValueId, size_t> input_index_;
  std::unordered_map<ir::ValueId, ir::ValueId> seen_;  // template value -> the graph value it met
  std::vector<ir::ValueId> bound_;
};

}  // namespace

std::optional<std::vector<ir::ValueId>> unify(const Template& t, const ir::Graph& g, ir::ValueId root) {
  if (t.root < 0 || root < 0) return std::nullopt;
  Unifier u(t, g);
  if (!u.same(t.root, root)) return std::nullopt;
  return u.bound();
}

}  // namespace kvf::compile
