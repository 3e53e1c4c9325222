#include "plan/buffer_plan.h"

#include <algorithm>
#include <map>

namespace kvf::plan {
namespace {

constexpr int64_t kAlign = 64;
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool is_state_update(const ir::Graph& g, const ir::Eqn& e) {
  return (e.op == ir::OpKind::kDynamicUpdateSlice || e.op == ir::OpKind::kScatterUpdate) &&
         g.value(e.in[0]).kind == ir::ValueKind::kState;
}

// First-fit allocator over a list of free [offset, offset + size) holes.
class Arena {
 public:
  int64_t take(int64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const int64_t at = it->first;
      const int64_t rest = it->second - bytes;
      free_.erase(it);
      if (rest > 0) free_[at + bytes] = rest;
      return at;
    }
    const int64_t at = top_;
    top_ += bytes;
    return at;
  }
  void give(int64_t at, int64_t bytes) {
    auto [it, inserted] = free_.emplace(at, bytes);
    (void)inserted;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t top() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;
  int64_t top_ = 0;
};

}  // namespace

bool is_alias(const ir::Graph& g, const ir::Eqn& e) {
  if (e.op == ir::OpKind::kReshape) return true;
  if (e.op != ir::OpKind::kTranspose) return false;
  const Shape& in = g.type(e.in[0]).shape;
  int64_t last = -1;
  for (int64_t axis : e.params.axes) {  // the non-unit axes keep their order
    if (in[static_cast<size_t>(axis)] == 1) continue;
    if (axis < last) return false;
    last = axis;
  }
  return true;
}

int64_t element_bytes(DType dt) {
  switch (dt) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI8: case DType::kBool: return 1;
    default: return 0;
  }
}

Result<BufferPlan> plan_buffers(const ir::Graph& g, const std::vector<int64_t>& scratch_bytes) {
  const size_t nv = g.values.size(), ne = g.eqns.size();
  BufferPlan p;
  p.storage_of.resize(nv);
  p.offset.assign(nv, -1);
  p.scratch_offset.assign(ne, -1);
  for (size_t v = 0; v < nv; ++v) p.storage_of[v] = static_cast<ir::ValueId>(v);
  for (const ir::Eqn& e : g.eqns) {
    if (is_alias(g, e) || is_state_update(g, e)) {
      p.storage_of[static_cast<size_t>(e.out)] = p.storage_of[static_cast<size_t>(e.in[0])];
    }
  }
  // Lifetimes of storage owners: from the defining eqn to the last eqn reading any alias.
  const int forever = static_cast<int>(ne);
  std::vector<int> last(nv, -1);
  auto use = [&](ir::ValueId v, int at) {
    int& l = last[static_cast<size_t>(p.storage_of[static_cast<size_t>(v)])];
    l = std::max(l, at);
  };
  for (size_t e = 0; e < ne; ++e) {
    for (ir::ValueId v : g.eqns[e].in) use(v, static_cast<int>(e));
    use(g.eqns[e].out, static_cast<int>(e));
  }
  for (const ir::Output& o : g.outputs) use(o.value, forever);
  for (const ir::Validation& c : g.validations) use(c.witness, forever);
  // A linear and the add right after it may run as one launch (exec/cuda's residual
  // epilogue), which reads the linear's input whole while it writes the sum: the input
  // lives through the add, so the sum never takes its bytes.
  for (size_t e = 1; e < ne; ++e) {
    const ir::Eqn& add = g.eqns[e];
    const ir::Eqn& lin = g.eqns[e - 1];
    if (add.op == ir::OpKind::kAdd && lin.op == ir::OpKind::kLinear && (add.in[0] == lin.out || add.in[1] == lin.out)) {
      use(lin.in[0], static_cast<int>(e));
    }
  }
  // An RMSNorm and the linears right after it that read it may run as one launch (exec/cuda's
  // fused norm), which reads the norm's input while it writes the linears' outputs (and the
  // gated unit's or the sum after them): the input lives through those eqns, so none of
  // their outputs takes its bytes (the final norm's input has no later reader of its own).
  for (size_t e = 0; e + 1 < ne; ++e) {
    const ir::Eqn& norm = g.eqns[e];
    if (norm.op != ir::OpKind::kRmsNorm) continue;
    size_t j = e + 1;
    while (j < ne && g.eqns[j].op == ir::OpKind::kLinear && g.eqns[j].in[0] == norm.out) use(norm.in[0], static_cast<int>(j++));
    const bool after = j > e + 1 && j < ne && (g.eqns[j].op == ir::OpKind::kGlu || g.eqns[j].op == ir::OpKind::kAdd);
    if (after) use(norm.in[0], static_cast<int>(j));
  }
  // Owners die after their last use; scratch dies with its eqn.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> dying(ne + 1);
  Arena arena;
  for (size_t e = 0; e < ne; ++e) {
    const ir::Eqn& eq = g.eqns[e];
    const auto out = static_cast<size_t>(eq.out);
    if (p.storage_of[out] == eq.out) {
      const ir::TensorType& t = g.type(eq.out);
      const int64_t eb = element_bytes(t.dtype);
      if (eb == 0) return unsupported("plan: no executor storage for ", ir::type_str(t), " (eqn ", e, ")");
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const int64_t bytes = align_up(std::max<int64_t>(n * eb, 1));
      p.naive_bytes += bytes;
      p.offset[out] = arena.take(bytes);
      dying[static_cast<size_t>(std::max(last[out], static_cast<int>(e)))].push_back({p.offset[out], bytes});
    }
    if (e < scratch_bytes.size() && scratch_bytes[e] > 0) {
      const int64_t bytes = align_up(scratch_bytes[e]);
      p.naive_bytes += bytes;
      p.scratch_offset[e] = arena.take(bytes);
      dying[e].push_back({p.scratch_offset[e], bytes});
    }
    for (auto [at, bytes] : dying[e]) arena.give(at, bytes);
  }
  p.arena_bytes = arena.top();
  return p;
}

}  // namespace kvf::plan
