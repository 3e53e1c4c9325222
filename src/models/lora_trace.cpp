#include "models/lora_trace.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>

namespace kvf::models {
namespace {

using ir::V;

// The constant a projection's weight reads (through the cast from its stored type), or -1.
ir::ValueId weight_constant(const ir::Graph& g, ir::ValueId w) {
  const ir::Value& v = g.value(w);
  if (v.kind == ir::ValueKind::kConstant) return w;
  if (v.kind != ir::ValueKind::kIntermediate || v.producer < 0) return -1;
  const ir::Eqn& e = g.eqns[static_cast<size_t>(v.producer)];
  if (e.op != ir::OpKind::kCast || g.value(e.in[0]).kind != ir::ValueKind::kConstant) return -1;
  return e.in[0];
}

// A stack's part as a constant over the set's bytes (no copy: every step shares them).
V stack_constant(ir::Builder& b, const std::string& name, const char* part, Shape shape,
                 const std::shared_ptr<const std::vector<float>>& v) {
  Result<HostTensor> t = HostTensor::borrow(DType::kF32, std::move(shape), v->data(),
                                            static_cast<int64_t>(v->size() * sizeof(float)), v);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);  // the builder has failed: a poisoned handle
  }
  return b.constant(str_cat("lora.", part, ".", name), std::move(*t));
}

}  // namespace

LoraSet::LoraSet(std::vector<std::shared_ptr<const LoraAdapter>> adapters) : adapters_(std::move(adapters)) {
  const auto n = static_cast<int64_t>(adapters_.size()) + 1;
  for (const auto& ad : adapters_) {
    for (const auto& [name, f] : ad->targets) {
      LoraStack& st = stacks_[name];
      st.rank = std::max(st.rank, ad->rank);
      st.in = f.a.shape()[1];
      st.out = f.b.shape()[0];
    }
  }
  for (auto& [name, st] : stacks_) {
    const int64_t r = st.rank, in = st.in, out = st.out;
    std::vector<float> a(static_cast<size_t>(n * r * in), 0.0f), b(static_cast<size_t>(n * r * out), 0.0f);
    std::vector<float> s(static_cast<size_t>(n), 0.0f);
    for (int64_t i = 1; i < n; ++i) {
      const LoraAdapter& ad = *adapters_[static_cast<size_t>(i - 1)];
      auto it = ad.targets.find(name);
      if (it == ad.targets.end()) continue;
      const int64_t ri = ad.rank;
      const float* fa = it->second.a.data<float>();
      const float* fb = it->second.b.data<float>();
      std::copy(fa, fa + ri * in, a.begin() + i * r * in);  // rows past ri stay 0
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t j = 0; j < ri; ++j) b[static_cast<size_t>((i * r + j) * out + o)] = fb[o * ri + j];
      }
      s[static_cast<size_t>(i)] = static_cast<float>(ad.scale);
    }
    st.a = std::make_shared<const std::vector<float>>(std::move(a));
    st.b = std::make_shared<const std::vector<float>>(std::move(b));
    st.s = std::make_shared<const std::vector<float>>(std::move(s));
  }
}

const LoraStack* LoraSet::stack(const std::string& name) const {
  auto it = stacks_.find(name);
  return it == stacks_.end() ? nullptr : &it->second;
}

Result<int32_t> lora_id(const LoraSet* set, const std::string& name) {
  std::string loaded;
  for (size_t i = 0; set != nullptr && i < set->adapters().size(); ++i) {
    if (set->adapters()[i]->name == name) return static_cast<int32_t>(i + 1);
    loaded += str_cat(loaded.empty() ? "" : ", ", set->adapters()[i]->name);
  }
  return invalid_input("no LoRA adapter \"", name, "\" (", loaded.empty() ? "none is loaded: --lora NAME=PATH" : "loaded: " + loaded, ")");
}

void trace_lora(StepTrace& t, const LoraSet& set, int64_t tokens) {
  const auto n = static_cast<int64_t>(set.adapters().size());
  t.adapter = t.b.map_slot(ir::Slot::kAdapter, {tokens}, n + 1);
  const V ids = t.adapter;
  t.b.on_linear([&set, ids, n](V x, V weight, V y) -> V {
    ir::Builder& b = *y.b;
    if (b.failed()) return y;
    const ir::ValueId c = weight_constant(b.graph(), weight.id);
    const LoraStack* st = c < 0 ? nullptr : set.stack(b.graph().value(c).name);
    if (st == nullptr) return y;
    const std::string name = b.graph().value(c).name;  // a copy: constants added below move the values
    const int64_t out = st->out, in = st->in, r = st->rank, rows = ids.dim(0);
    if (numel(x.shape()) != rows * in) {
      b.fail(unsupported("LoRA on ", name, ": its projection sees ", numel(x.shape()) / in, " rows, the step has ",
                         rows, " tokens"));
      return y;
    }
    const V a_rows = b.reshape(b.gather(stack_constant(b, name, "a", {n + 1, r * in}, st->a), ids), {rows, r, in});
    const V ax = b.matmul(a_rows, b.reshape(x, {rows, in, 1}));  // [rows, r, 1]
    const V bt_rows = b.reshape(b.gather(stack_constant(b, name, "b", {n + 1, r * out}, st->b), ids), {rows, r, out});
    const V bax = b.matmul(b.reshape(ax, {rows, 1, r}), bt_rows);  // [rows, 1, out]
    const V s = b.broadcast(b.reshape(b.gather(stack_constant(b, name, "scale", {n + 1, 1}, st->s), ids), {rows, 1, 1}),
                            {rows, 1, out});
    return y + b.reshape(bax * s, y.shape());
  });
}

}  // namespace kvf::models
