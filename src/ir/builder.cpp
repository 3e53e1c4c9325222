// Builder: appends typed eqns through infer(); the first error sticks.
#include "ir/builder.h"

#include <cmath>

#include "ir/infer.h"

namespace kvf::ir {
namespace {
const TensorType kPoisonType{};
}

const TensorType& V::type() const { return valid() ? b->graph().type(id) : kPoisonType; }

int64_t V::dim(int64_t axis) const {
  const int64_t r = rank();
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r ? shape()[static_cast<size_t>(axis)] : 0;
}

Builder::Builder(std::string graph_name) { g_.name = std::move(graph_name); }

void Builder::fail(Error e) {
  if (!error_) error_ = std::move(e);
}

V Builder::add_value(Value v) {
  g_.values.push_back(std::move(v));
  return V{this, static_cast<ValueId>(g_.values.size() - 1)};
}

bool Builder::usable(const std::vector<V>& in) {
  if (error_) return false;
  for (const V& v : in) {
    if (v.b != this || v.id < 0) {
      fail(internal_error("operand from another builder or a poisoned value"));
      return false;
    }
  }
  return true;
}

int64_t Builder::norm_axis(V x, int64_t axis) { return axis < 0 ? axis + x.rank() : axis; }

V Builder::slot(Slot s, DType dtype, Shape shape) {
  if (error_) return poison();
  const ValueId existing = g_.find_slot(s);
  if (existing >= 0) {
    TensorType want{dtype, shape};
    if (g_.type(existing) != want) {
      fail(invalid_input("slot ", slot_name(s), " declared as ", type_str(g_.type(existing)), " and as ", type_str(want)));
      return poison();
    }
    return V{this, existing};
  }
  Value v;
  v.type = {dtype, std::move(shape)};
  v.kind = ValueKind::kSlot;
  v.slot = s;
  v.name = std::string(slot_name(s));
  return add_value(std::move(v));
}

V Builder::map_slot(Slot s, Shape shape, int64_t pool_slots) {
  if (error_) return poison();
  if (s != Slot::kSlotMap && s != Slot::kWriteMap && s != Slot::kAdapter) {
    fail(invalid_input("map_slot: ", slot_name(s), " is not a map"));
    return poison();
  }
  if (pool_slots <= 0) {
    fail(invalid_input("map_slot: ", slot_name(s), " over a pool of ", pool_slots, " slots"));
    return poison();
  }
  V v = slot(s, DType::kI32, std::move(shape));
  if (error_) return poison();
  Value& val = g_.values[static_cast<size_t>(v.id)];
  if (val.slot_bound != 0 && val.slot_bound != pool_slots) {
    fail(invalid_input("map_slot: ", slot_name(s), " declared over ", val.slot_bound, " and ", pool_slots, " slots"));
    return poison();
  }
  val.slot_bound = pool_slots;
  return v;
}

V Builder::constant(std::string name, HostTensor data) {
  if (error_) return poison();
  if (auto it = constants_.find(name); it != constants_.end()) {
    const HostTensor& have = g_.value(it->second).data;
    if (have.raw() == data.raw() && have.dtype() == data.dtype() && have.shape() == data.shape() &&
        have.strides() == data.strides()) {
      return V{this, it->second};
    }
    fail(invalid_input("constant ", name, " declared twice with different data"));
    return poison();
  }
  constants_[name] = static_cast<ValueId>(g_.values.size());
  Value v;
  v.type = {data.dtype(), data.shape()};
  v.kind = ValueKind::kConstant;
  v.name = std::move(name);
  v.data = std::move(data);
  return add_value(std::move(v));
}

V Builder::literal(double x, DType dtype) {
  if (error_) return poison();
  if ((is_integer(dtype) || dtype == DType::kBool) && !(std::isfinite(x) && x == std::trunc(x))) {
    fail(invalid_input("literal ", x, " is not a whole number, as ", dtype_name(dtype), " needs"));
    return poison();
  }
  if (is_block_quant(dtype)) {
    fail(invalid_input("a literal cannot be ", dtype_name(dtype)));
    return poison();
  }
  Value v;
  v.type = {dtype, {}};
  v.kind = ValueKind::kLiteral;
  v.literal = x;
  return add_value(std::move(v));
}

V Builder::state(std::string name, DType dtype, Shape shape, StateRole role, int layer) {
  if (error_) return poison();
  Value v;
  v.type = {dtype, std::move(shape)};
  v.kind = ValueKind::kState;
  v.name = std::move(name);
  v.role = role;
  v.layer = layer;
  return add_value(std::move(v));
}

void Builder::output(std::string name, V v) {
  if (usable({v})) g_.outputs.push_back({std::move(name), v.id});
}

void Builder::donate(V state_in, V state_out) {
  if (usable({state_in, state_out})) g_.donations.push_back({state_in.id, state_out.id});
}

void Builder::validate(V witness, std::string what) {
  if (usable({witness})) g_.validations.push_back({witness.id, std::move(what)});
}

V Builder::name(V v, std::string name) {
  if (!usable({v})) return v;
  Value& val = g_.values[static_cast<size_t>(v.id)];
  if (val.kind == ValueKind::kIntermediate && val.name.empty()) val.name = std::move(name);
  return v;
}

V Builder::name(V v, std::string name, int layer) { return this->name(v, str_cat(name, ".", layer)); }

V Builder::emit(OpKind op, std::vector<V> in, Params params) {
  if (!usable(in)) return poison();
  std::vector<TensorType> types;
  Eqn eq{op, {}, -1, std::move(params)};
  for (const V& v : in) {
    types.push_back(v.type());
    eq.in.push_back(v.id);
  }
  Result<TensorType> t = infer(op, eq.params, types);
  if (!t) {
    fail(t.take_error().context("tracing ", g_.name, " eqn ", g_.eqns.size()));
    return poison();
  }
  Value out;
  out.type = std::move(*t);
  out.producer = static_cast<int>(g_.eqns.size());
  V v = add_value(std::move(out));
  eq.out = v.id;
  g_.eqns.push_back(std::move(eq));
  return v;
}

V Builder::compare(V a, V b, CmpDir dir) {
  Params p;
  p.cmp = dir;
  return emit(OpKind::kCompare, {a, b}, std::move(p));
}

V Builder::reduce_sum(V x, std::vector<int64_t> axes, bool keepdim) {
  for (int64_t& a : axes) a = norm_axis(x, a);
  Params p;
  p.axes = std::move(axes);
  p.keepdim = keepdim;
  return emit(OpKind::kReduceSum, {x}, std::move(p));
}

V Builder::reduce_max(V x, std::vector<int64_t> axes, bool keepdim) {
  for (int64_t& a : axes) a = norm_axis(x, a);
  Params p;
  p.axes = std::move(axes);
  p.keepdim = keepdim;
  return emit(OpKind::kReduceMax, {x}, std::move(p));
}

V Builder::reshape(V x, Shape shape) {
  if (!usable({x})) return poison();
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer_at < 0) infer_at = static_cast<int64_t>(i);
    else known *= shape[i];
  }
  if (infer_at >= 0) {
    Result<int64_t> n = checked_numel(x.shape());
    if (n.ok() && known > 0) shape[static_cast<size_t>(infer_at)] = *n / known;
  }
  Params p;
  p.shape = std::move(shape);
  return emit(OpKind::kReshape, {x}, std::move(p));
}

V Builder::transpose(V x, std::vector<int64_t> perm) {
  for (int64_t& a : perm) a = norm_axis(x, a);
  Params p;
  p.axes = std::move(perm);
  return emit(OpKind::kTranspose, {x}, std::move(p));
}

V Builder::broadcast(V x, Shape shape) {
  Params p;
  p.shape = std::move(shape);
  return emit(OpKind::kBroadcast, {x}, std::move(p));
}

V Builder::slice(V x, std::vector<int64_t> starts, std::vector<int64_t> limits, std::vector<int64_t> steps) {
  Params p;
  p.starts = std::move(starts);
  p.limits = std::move(limits);
  p.steps = std::move(steps);
  return emit(OpKind::kSlice, {x}, std::move(p));
}

V Builder::slice_axis(V x, int64_t axis, int64_t start, int64_t limit, int64_t step) {
  if (!usable({x})) return poison();
  axis = norm_axis(x, axis);
  if (axis < 0 || axis >= x.rank()) {  // else the slice would silently keep all of x
    fail(invalid_input("slice: axis ", axis, " out of range for ", type_str(x.type()))
             .context("tracing ", g_.name, " eqn ", g_.eqns.size()));
    return poison();
  }
  std::vector<int64_t> starts(static_cast<size_t>(x.rank()), 0);
  std::vector<int64_t> limits = x.shape();
  std::vector<int64_t> steps(static_cast<size_t>(x.rank()), 1);
  starts[static_cast<size_t>(axis)] = start;
  limits[static_cast<size_t>(axis)] = limit;
  steps[static_cast<size_t>(axis)] = step;
  return slice(x, std::move(starts), std::move(limits), std::move(steps));
}

V Builder::concat(std::vector<V> xs, int64_t axis) {
  Params p;
  p.axis = xs.empty() ? axis : norm_axis(xs[0], axis);
  return emit(OpKind::kConcat, std::move(xs), std::move(p));
}

V Builder::iota(Shape shape, int64_t axis, DType dtype) {
  Params p;
  p.axis = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
  p.shape = std::move(shape);
  p.dtype = dtype;
  return emit(OpKind::kIota, {}, std::move(p));
}

V Builder::cast(V x, DType dtype) {
  Params p;
  p.dtype = dtype;
  return emit(OpKind::kCast, {x}, std::move(p));
}

V Builder::dynamic_update_slice(V base, V upd, V start, int64_t axis) {
  Params p;
  p.axis = norm_axis(base, axis);
  return emit(OpKind::kDynamicUpdateSlice, {base, upd, start}, std::move(p));
}

Result<Graph> Builder::finish() {
  if (error_) return *error_;
  Status s = verify(g_);
  if (!s) return s.take_error().context("verifying ", g_.name);
  return g_;
}

namespace {
// A poisoned handle has no builder; either operand's builder records the failure.
Builder* owner(V a, V b) { return a.b ? a.b : b.b; }
V bin(OpKind op, V a, V b) {
  Builder* bld = owner(a, b);
  return bld ? bld->binary(op, a, b) : V{};
}
V lit(V like, double x) { return like.b ? like.b->like(like, x) : V{}; }
}  // namespace

V operator+(V a, V b) { return bin(OpKind::kAdd, a, b); }
V operator-(V a, V b) { return bin(OpKind::kSub, a, b); }
V operator*(V a, V b) { return bin(OpKind::kMul, a, b); }
V operator/(V a, V b) { return bin(OpKind::kDiv, a, b); }
V operator-(V a) { return a.b ? a.b->unary(OpKind::kNeg, a) : V{}; }
V operator+(V a, double b) { return a + lit(a, b); }
V operator-(V a, double b) { return a - lit(a, b); }
V operator*(V a, double b) { return a * lit(a, b); }
V operator/(V a, double b) { return a / lit(a, b); }
V operator+(double a, V b) { return lit(b, a) + b; }
V operator-(double a, V b) { return lit(b, a) - b; }
V operator*(double a, V b) { return lit(b, a) * b; }
V operator/(double a, V b) { return lit(b, a) / b; }

}  // namespace kvf::ir
