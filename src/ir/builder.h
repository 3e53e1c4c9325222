// Builder: the tracer's interface. Model code calls it (directly or through ops::) and it
// appends typed equations to a Graph; C++ control flow runs at trace time and leaves no trace.
// A typing error is sticky: later calls become no-ops and finish() reports the first one.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kvf::ir {

class Builder;

// A handle to a value under construction. Cheap to copy; arithmetic operators emit eqns.
struct V {
  Builder* b = nullptr;
  ValueId id = -1;

  bool valid() const { return b != nullptr && id >= 0; }
  const TensorType& type() const;
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end
};

class Builder {
 public:
  explicit Builder(std::string graph_name);

  // Where a traced model's projections pass: ops::linear hands the hook each projection's
  // x, weight and result (bias included) and returns what the hook returns. A model's LoRA
  // adapters add their term here (models/lora_trace.h), whatever the family.
  using LinearHook = std::function<V(V x, V weight, V y)>;
  void on_linear(LinearHook hook) { linear_hook_ = std::move(hook); }
  const LinearHook& linear_hook() const { return linear_hook_; }

  // ---- leaves
  V slot(Slot s, DType dtype, Shape shape);  // the same slot twice returns the same value
  // A map slot whose words name rows of a table of `pool_slots` rows (kSlotMap, kWriteMap:
  // a paged pool; kAdapter: the adapters): every binder enforces it (ir::check_slot) before
  // anything runs.
  V map_slot(Slot s, Shape shape, int64_t pool_slots);
  // A weight. The same name with the same tensor returns the existing value (tied
  // embeddings); the same name with different data is an error.
  V constant(std::string name, HostTensor data);
  V literal(double x, DType dtype = DType::kF32);
  V state(std::string name, DType dtype, Shape shape, StateRole role = StateRole::kOther, int layer = -1);

  // ---- graph interface
  void output(std::string name, V v);
  void donate(V state_in, V state_out);
  void validate(V witness, std::string what);
  V name(V v, std::string name);              // a stable name for an intermediate
  V name(V v, std::string name, int layer);   // "name.layer"

  // ---- primitives (axes may be negative: they count from the end)
  V emit(OpKind op, std::vector<V> in, Params params = {});
  V unary(OpKind op, V x) { return emit(op, {x}); }
  V binary(OpKind op, V a, V b) { return emit(op, {a, b}); }
  V compare(V a, V b, CmpDir dir);
  V select(V pred, V on_true, V on_false) { return emit(OpKind::kSelect, {pred, on_true, on_false}); }
  V reduce_sum(V x, std::vector<int64_t> axes, bool keepdim = false);
  V reduce_max(V x, std::vector<int64_t> axes, bool keepdim = false);
  V reshape(V x, Shape shape);  // one -1 entry is inferred
  V transpose(V x, std::vector<int64_t> perm);
  V broadcast(V x, Shape shape);
  V slice(V x, std::vector<int64_t> starts, std::vector<int64_t> limits, std::vector<int64_t> steps = {});
  V slice_axis(V x, int64_t axis, int64_t start, int64_t limit, int64_t step = 1);
  V concat(std::vector<V> xs, int64_t axis);
  V iota(Shape shape, int64_t axis, DType dtype = DType::kI32);
  V cast(V x, DType dtype);
  V gather(V table, V idx) { return emit(OpKind::kGather, {table, idx}); }
  V scatter_update(V base, V idx, V upd) { return emit(OpKind::kScatterUpdate, {base, idx, upd}); }
  V dynamic_update_slice(V base, V upd, V start, int64_t axis);
  V matmul(V a, V b) { return emit(OpKind::kMatMul, {a, b}); }
  V all_reduce(V x) { return emit(OpKind::kAllReduce, {x}); }

  // A literal with x's dtype (for `x * 0.5`-style code).
  V like(V x, double value) { return literal(value, x.dtype()); }

  // Records a tracing error (the first one sticks); ops:: use it for their own checks.
  void fail(Error e);
  bool failed() const { return error_.has_value(); }
  const Graph& graph() const { return g_; }
  // The verified graph, or the first error recorded while tracing.
  Result<Graph> finish();

 private:
  V add_value(Value v);
  V poison() { return V{this, -1}; }  // what calls return once tracing has failed
  bool usable(const std::vector<V>& in);
  int64_t norm_axis(V x, int64_t axis);

  Graph g_;
  std::optional<Error> error_;
  std::map<std::string, ValueId> constants_;  // by name
  LinearHook linear_hook_;
};

// Elementwise arithmetic on handles; a double operand becomes a literal of the other's dtype.
V operator+(V a, V b);
V operator-(V a, V b);
V operator*(V a, V b);
V operator/(V a, V b);
V operator-(V a);
V operator+(V a, double b);
V operator-(V a, double b);
V operator*(V a, double b);
V operator/(V a, double b);
V operator+(double a, V b);
V operator-(double a, V b);
V operator*(double a, V b);
V operator/(double a, V b);

}  // namespace kvf::ir
