#include "models/lora_trace.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kvf::models {
namespace {

using ir::V;

// The stacked factors of one base weight: A [n, r * in], B [n, out * r], s [n, 1], n = adapters + 1.
struct Stacks {
  V a, b, s;
  int64_t rank = 0;
};

// The constant a projection's weight reads (through the cast from its stored type), or -1.
ir::ValueId weight_constant(const ir::Graph& g, ir::ValueId w) {
  const ir::Value& v = g.value(w);
  if (v.kind == ir::ValueKind::kConstant) return w;
  if (v.kind != ir::ValueKind::kIntermediate || v.producer < 0) return -1;
  const ir::Eqn& e = g.eqns[static_cast<size_t>(v.producer)];
  if (e.op != ir::OpKind::kCast || g.value(e.in[0]).kind != ir::ValueKind::kConstant) return -1;
  return e.in[0];
}

std::optional<Stacks> stacks_for(ir::Builder& b, const LoraSet& set, const std::string& name, int64_t out, int64_t in) {
  Stacks st;
  for (const auto& a : set.adapters) {
    if (a->targets.count(name) != 0) st.rank = std::max(st.rank, a->rank);
  }
  if (st.rank == 0) return std::nullopt;
  const int64_t n = static_cast<int64_t>(set.adapters.size()) + 1, r = st.rank;
  std::vector<float> a(static_cast<size_t>(n * r * in), 0.0f), bs(static_cast<size_t>(n * out * r), 0.0f);
  std::vector<float> s(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 1; i < n; ++i) {
    const LoraAdapter& ad = *set.adapters[static_cast<size_t>(i - 1)];
    auto it = ad.targets.find(name);
    if (it == ad.targets.end()) continue;
    const int64_t ri = ad.rank;
    const float* fa = it->second.a.data<float>();
    const float* fb = it->second.b.data<float>();
    std::copy(fa, fa + ri * in, a.begin() + i * r * in);  // rows past ri stay 0
    for (int64_t o = 0; o < out; ++o) std::copy(fb + o * ri, fb + (o + 1) * ri, bs.begin() + (i * out + o) * r);
    s[static_cast<size_t>(i)] = static_cast<float>(ad.scale);
  }
  auto constant = [&](const char* part, Shape shape, const std::vector<float>& v) {
    Result<HostTensor> t = HostTensor::from_f32(shape, v);
    if (!t) {
      b.fail(t.take_error());
      return b.literal(0.0);  // the builder has failed: a poisoned handle
    }
    return b.constant(str_cat("lora.", part, ".", name), std::move(*t));
  };
  st.a = constant("a", {n, r * in}, a);
  st.b = constant("b", {n, out * r}, bs);
  st.s = constant("scale", {n, 1}, s);
  return st;
}

}  // namespace

Result<int32_t> lora_id(const LoraSet* set, const std::string& name) {
  std::string loaded;
  for (size_t i = 0; set != nullptr && i < set->adapters.size(); ++i) {
    if (set->adapters[i]->name == name) return static_cast<int32_t>(i + 1);
    loaded += str_cat(loaded.empty() ? "" : ", ", set->adapters[i]->name);
  }
  return invalid_input("no LoRA adapter \"", name, "\" (", loaded.empty() ? "none is loaded: --lora NAME=PATH" : "loaded: " + loaded, ")");
}

void trace_lora(StepTrace& t, const LoraSet& set, int64_t tokens) {
  const auto n = static_cast<int64_t>(set.adapters.size());
  t.adapter = t.b.map_slot(ir::Slot::kAdapter, {tokens}, n + 1);
  auto made = std::make_shared<std::map<std::string, std::optional<Stacks>>>();
  const V ids = t.adapter;
  t.b.on_linear([&set, ids, made](V x, V weight, V y) -> V {
    ir::Builder& b = *y.b;
    if (b.failed()) return y;
    const ir::ValueId c = weight_constant(b.graph(), weight.id);
    if (c < 0) return y;
    const std::string name = b.graph().value(c).name;
    const int64_t out = y.dim(-1), in = x.dim(-1), rows = ids.dim(0);
    auto it = made->find(name);
    if (it == made->end()) it = made->emplace(name, stacks_for(b, set, name, out, in)).first;
    if (!it->second) return y;
    const Stacks& st = *it->second;
    if (numel(x.shape()) != rows * in) {
      b.fail(unsupported("LoRA on ", name, ": its projection sees ", numel(x.shape()) / in, " rows, the step has ",
                         rows, " tokens"));
      return y;
    }
    const int64_t r = st.rank;
    const V a_rows = b.reshape(b.gather(st.a, ids), {rows, r, in});
    const V ax = b.matmul(a_rows, b.reshape(x, {rows, in, 1}));                               // [rows, r, 1]
    const V bax = b.matmul(b.reshape(b.gather(st.b, ids), {rows, out, r}), ax);               // [rows, out, 1]
    const V s = b.broadcast(b.reshape(b.gather(st.s, ids), {rows, 1, 1}), {rows, out, 1});
    return y + b.reshape(bax * s, y.shape());
  });
}

}  // namespace kvf::models
