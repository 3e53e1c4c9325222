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

// A stack's part as the step's constant: the set's bytes, shared by every step.
V stack_constant(ir::Builder& b, const std::string& name, const char* part, const HostTensor& t) {
  return b.constant(str_cat("lora.", part, ".", name), t);
}

// The stacked rows gathered by ids, in f32 for the products.
V gathered(ir::Builder& b, V stack, V ids) {
  const V rows = b.gather(stack, ids);
  return stack.dtype() == DType::kF32 ? rows : b.cast(rows, DType::kF32);
}

// A zeroed [entries, width] tensor of `type` (f32 or f16) with `put(entry, i, value)` filling it.
struct StackFill {
  HostTensor t;
  void put(int64_t entry, int64_t width, int64_t i, float v) {
    const int64_t at = entry * width + i;
    if (t.dtype() == DType::kF32) {
      t.data<float>()[at] = v;
    } else {
      t.data<uint16_t>()[at] = f32_to_f16_bits(v);
    }
  }
};

}  // namespace

DType lora_stack_type(DType weight) {
  return weight == DType::kF16 || is_block_quant(weight) ? DType::kF16 : DType::kF32;
}

LoraSet::LoraSet(std::vector<std::shared_ptr<const LoraAdapter>> adapters) : adapters_(std::move(adapters)) {
  for (const auto& ad : adapters_) {
    for (const auto& [name, f] : ad->targets) {
      LoraStack& st = shapes_[name];
      st.rank = std::max(st.rank, ad->rank);
      st.in = f.a.shape()[1];
      st.out = f.b.shape()[0];
    }
  }
}

LoraSet::LoraSet(LoraSet&& o) noexcept {
  std::lock_guard lock(o.mu_);
  adapters_ = std::move(o.adapters_);
  shapes_ = std::move(o.shapes_);
  stacks_ = std::move(o.stacks_);
}

LoraSet& LoraSet::operator=(LoraSet&& o) noexcept {
  if (this == &o) return *this;
  std::scoped_lock lock(mu_, o.mu_);
  adapters_ = std::move(o.adapters_);
  shapes_ = std::move(o.shapes_);
  stacks_ = std::move(o.stacks_);
  return *this;
}

Result<const LoraStack*> LoraSet::stack(const std::string& name, DType type) const {
  auto shape = shapes_.find(name);
  if (shape == shapes_.end()) return static_cast<const LoraStack*>(nullptr);
  std::lock_guard lock(mu_);
  if (auto built = stacks_.find({name, type}); built != stacks_.end()) return &built->second;
  LoraStack st = shape->second;
  const auto n = static_cast<int64_t>(adapters_.size()) + 1;
  const int64_t r = st.rank, in = st.in, out = st.out;
  Result<HostTensor> ta = HostTensor::zeros(type, {n, r * in}), tb = HostTensor::zeros(type, {n, r * out});
  Result<HostTensor> ts = HostTensor::zeros(DType::kF32, {n, 1});
  for (Result<HostTensor>* t : {&ta, &tb, &ts}) {
    if (!*t) return t->take_error().context("LoRA stack of ", name);
  }
  StackFill a{std::move(*ta)}, b{std::move(*tb)}, s{std::move(*ts)};
  for (int64_t i = 1; i < n; ++i) {
    const LoraAdapter& ad = *adapters_[static_cast<size_t>(i - 1)];
    auto f = ad.targets.find(name);
    if (f == ad.targets.end()) continue;
    const int64_t ri = ad.rank;
    const float* fa = f->second.a.data<float>();
    const float* fb = f->second.b.data<float>();
    for (int64_t k = 0; k < ri * in; ++k) a.put(i, r * in, k, fa[k]);  // rows past ri stay 0
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t j = 0; j < ri; ++j) b.put(i, r * out, j * out + o, fb[o * ri + j]);
    }
    s.put(i, 1, 0, static_cast<float>(ad.scale));
  }
  st.a = std::move(a.t);
  st.b = std::move(b.t);
  st.s = std::move(s.t);
  return &stacks_.emplace(std::pair{name, type}, std::move(st)).first->second;
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
  t.b.on_linear([&set, ids](V x, V weight, V y) -> V {
    ir::Builder& b = *y.b;
    if (b.failed()) return y;
    const ir::ValueId c = weight_constant(b.graph(), weight.id);
    if (c < 0) return y;
    const std::string name = b.graph().value(c).name;  // a copy: constants added below move the values
    Result<const LoraStack*> found = set.stack(name, lora_stack_type(b.graph().value(c).type.dtype));
    if (!found) {
      b.fail(found.take_error());
      return y;
    }
    const LoraStack* st = *found;
    if (st == nullptr) return y;
    const int64_t out = st->out, in = st->in, r = st->rank, rows = ids.dim(0);
    if (numel(x.shape()) != rows * in) {
      b.fail(unsupported("LoRA on ", name, ": its projection sees ", numel(x.shape()) / in, " rows, the step has ",
                         rows, " tokens"));
      return y;
    }
    const V a_rows = b.reshape(gathered(b, stack_constant(b, name, "a", st->a), ids), {rows, r, in});
    const V ax = b.matmul(a_rows, b.reshape(x, {rows, in, 1}));  // [rows, r, 1]
    const V bt_rows = b.reshape(gathered(b, stack_constant(b, name, "b", st->b), ids), {rows, r, out});
    const V bax = b.matmul(b.reshape(ax, {rows, 1, r}), bt_rows);  // [rows, 1, out]
    const V s = b.broadcast(b.reshape(b.gather(stack_constant(b, name, "scale", st->s), ids), {rows, 1, 1}), {rows, 1, out});
    return y + b.reshape(bax * s, y.shape());
  });
}

}  // namespace kvf::models
