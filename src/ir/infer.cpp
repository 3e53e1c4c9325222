// Typing rules of the primitives (docs/ir.md is the prose version of this file).
#include "ir/infer.h"

#include <algorithm>

namespace kvf::ir {
namespace {

Error bad(OpKind op, const auto&... parts) { return invalid_input(op_name(op), ": ", parts...); }

Status check_arity(OpKind op, std::span<const TensorType> in, size_t n) {
  if (in.size() != n) return bad(op, "expects ", n, " operands, got ", in.size());
  return {};
}

Status check_shape(OpKind op, const Shape& s) {
  for (int64_t d : s) {
    if (d < 0) return bad(op, "negative dimension in ", shape_str(s));
  }
  return {};
}

Result<TensorType> infer_unary(OpKind op, const TensorType& x) {
  const bool int_ok = op == OpKind::kNeg || op == OpKind::kAbs;
  if (!is_float(x.dtype) && !(int_ok && x.dtype == DType::kI32)) {
    return bad(op, "needs a float operand, got ", type_str(x));
  }
  return x;
}

Result<TensorType> infer_binary(OpKind op, const Params& p, const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype) return bad(op, "operand dtypes differ: ", type_str(a), " vs ", type_str(b));
  Result<Shape> s = broadcast_shapes(a.shape, b.shape);
  if (!s) return s.take_error().context(op_name(op));
  if (op == OpKind::kAnd || op == OpKind::kOr) {
    if (a.dtype != DType::kBool) return bad(op, "needs pred operands, got ", type_str(a));
    return TensorType{DType::kBool, *s};
  }
  if (is_block_quant(a.dtype) || (a.dtype == DType::kBool && op != OpKind::kCompare)) {
    return bad(op, "cannot compute on ", type_str(a));
  }
  if (a.dtype == DType::kBool && p.cmp != CmpDir::kEq && p.cmp != CmpDir::kNe) {
    return bad(op, "pred operands compare only eq/ne");
  }
  return TensorType{op == OpKind::kCompare ? DType::kBool : a.dtype, *s};
}

Result<TensorType> infer_select(std::span<const TensorType> in) {
  const OpKind op = OpKind::kSelect;
  if (in[0].dtype != DType::kBool) return bad(op, "first operand must be pred, got ", type_str(in[0]));
  if (in[1].dtype != in[2].dtype) return bad(op, "branch dtypes differ: ", type_str(in[1]), " vs ", type_str(in[2]));
  Result<Shape> s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s) return s.take_error().context("select");
  Result<Shape> s2 = broadcast_shapes(*s, in[2].shape);
  if (!s2) return s2.take_error().context("select");
  return TensorType{in[1].dtype, *s2};
}

Result<TensorType> infer_reduce(OpKind op, const Params& p, const TensorType& x) {
  if (!is_float(x.dtype) && x.dtype != DType::kI32) return bad(op, "cannot reduce ", type_str(x));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t a : p.axes) {
    if (a < 0 || a >= rank) return bad(op, "axis ", a, " out of range for ", type_str(x));
    if (reduced[a]) return bad(op, "axis ", a, " named twice");
    reduced[a] = true;
  }
  if (p.axes.empty()) return bad(op, "no axes to reduce");
  TensorType out{x.dtype, {}};
  for (int64_t a = 0; a < rank; ++a) {
    if (!reduced[a]) out.shape.push_back(x.shape[a]);
    else if (p.keepdim) out.shape.push_back(1);
  }
  return out;
}

Result<TensorType> infer_reshape(const Params& p, const TensorType& x) {
  Status s = check_shape(OpKind::kReshape, p.shape);
  if (!s) return s.take_error();
  Result<int64_t> n_in = checked_numel(x.shape);
  Result<int64_t> n_out = checked_numel(p.shape);
  const bool in_ok = n_in.ok(), out_ok = n_out.ok();  // look at both: neither may die unchecked
  const bool counted = in_ok && out_ok;
  if (!counted || *n_in != *n_out) {
    return bad(OpKind::kReshape, "cannot reshape ", type_str(x), " to ", shape_str(p.shape));
  }
  return TensorType{x.dtype, p.shape};
}

Result<TensorType> infer_transpose(const Params& p, const TensorType& x) {
  if (p.axes.size() != x.shape.size()) {
    return bad(OpKind::kTranspose, "perm of ", p.axes.size(), " axes for ", type_str(x));
  }
  std::vector<bool> seen(x.shape.size(), false);
  TensorType out{x.dtype, Shape(x.shape.size())};
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const int64_t a = p.axes[i];
    if (a < 0 || a >= static_cast<int64_t>(x.shape.size()) || seen[a]) {
      return bad(OpKind::kTranspose, "perm is not a permutation of ", x.shape.size(), " axes");
    }
    seen[a] = true;
    out.shape[i] = x.shape[a];
  }
  return out;
}

Result<TensorType> infer_broadcast(const Params& p, const TensorType& x) {
  Status s = check_shape(OpKind::kBroadcast, p.shape);
  if (!s) return s.take_error();
  if (x.shape.size() > p.shape.size()) {
    return bad(OpKind::kBroadcast, "cannot broadcast ", type_str(x), " to fewer axes ", shape_str(p.shape));
  }
  const size_t off = p.shape.size() - x.shape.size();
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (x.shape[i] != 1 && x.shape[i] != p.shape[off + i]) {
      return bad(OpKind::kBroadcast, "cannot broadcast ", type_str(x), " to ", shape_str(p.shape));
    }
  }
  return TensorType{x.dtype, p.shape};
}

Result<TensorType> infer_slice(const Params& p, const TensorType& x) {
  const size_t r = x.shape.size();
  if (p.starts.size() != r || p.limits.size() != r || (!p.steps.empty() && p.steps.size() != r)) {
    return bad(OpKind::kSlice, "starts/limits/steps must have one entry per axis of ", type_str(x));
  }
  TensorType out{x.dtype, Shape(r)};
  for (size_t i = 0; i < r; ++i) {
    const int64_t step = p.steps.empty() ? 1 : p.steps[i];
    if (step < 1 || p.starts[i] < 0 || p.starts[i] > p.limits[i] || p.limits[i] > x.shape[i]) {
      return bad(OpKind::kSlice, "axis ", i, ": [", p.starts[i], ":", p.limits[i], ":", step,
                 "] is not inside ", type_str(x));
    }
    out.shape[i] = (p.limits[i] - p.starts[i] + step - 1) / step;
  }
  return out;
}

Result<TensorType> infer_concat(const Params& p, std::span<const TensorType> in) {
  if (in.empty()) return bad(OpKind::kConcat, "needs at least one operand");
  TensorType out = in[0];
  const int64_t r = static_cast<int64_t>(out.shape.size());
  if (p.axis < 0 || p.axis >= r) return bad(OpKind::kConcat, "axis ", p.axis, " out of range for ", type_str(out));
  for (size_t k = 1; k < in.size(); ++k) {
    const TensorType& t = in[k];
    if (t.dtype != out.dtype || static_cast<int64_t>(t.shape.size()) != r) {
      return bad(OpKind::kConcat, "operand ", type_str(t), " does not match ", type_str(in[0]));
    }
    for (int64_t a = 0; a < r; ++a) {
      if (a != p.axis && t.shape[a] != in[0].shape[a]) {
        return bad(OpKind::kConcat, "operand ", type_str(t), " differs from ", type_str(in[0]), " off axis ", p.axis);
      }
    }
    out.shape[p.axis] += t.shape[p.axis];
  }
  return out;
}

Result<TensorType> infer_iota(const Params& p) {
  Status s = check_shape(OpKind::kIota, p.shape);
  if (!s) return s.take_error();
  if (p.axis < 0 || p.axis >= static_cast<int64_t>(p.shape.size())) {
    return bad(OpKind::kIota, "axis ", p.axis, " out of range for ", shape_str(p.shape));
  }
  if (!is_float(p.dtype) && p.dtype != DType::kI32) return bad(OpKind::kIota, "dtype ", dtype_name(p.dtype));
  return TensorType{p.dtype, p.shape};
}

// Casting a block-quantized weight to a float dtype is how the IR says "dequantize";
// executors fuse it into the consuming matmul. Nothing casts into a block type.
Result<TensorType> infer_cast(const Params& p, const TensorType& x) {
  if (is_block_quant(p.dtype) || (is_block_quant(x.dtype) && !is_float(p.dtype))) {
    return bad(OpKind::kCast, "cannot cast ", type_str(x), " to ", dtype_name(p.dtype));
  }
  return TensorType{p.dtype, x.shape};
}

Result<TensorType> infer_gather(std::span<const TensorType> in) {
  const TensorType& table = in[0];
  const TensorType& idx = in[1];
  if (table.shape.empty()) return bad(OpKind::kGather, "table must have rank >= 1");
  if (idx.dtype != DType::kI32) return bad(OpKind::kGather, "indices must be i32, got ", type_str(idx));
  TensorType out{table.dtype, idx.shape};
  out.shape.insert(out.shape.end(), table.shape.begin() + 1, table.shape.end());
  return out;
}

Result<TensorType> infer_scatter(std::span<const TensorType> in) {
  const TensorType& base = in[0];
  const TensorType& idx = in[1];
  const TensorType& upd = in[2];
  if (base.shape.empty()) return bad(OpKind::kScatterUpdate, "base must have rank >= 1");
  if (idx.dtype != DType::kI32 || idx.shape.size() != 1) {
    return bad(OpKind::kScatterUpdate, "indices must be i32[M], got ", type_str(idx));
  }
  Shape want{idx.shape[0]};
  want.insert(want.end(), base.shape.begin() + 1, base.shape.end());
  if (upd.dtype != base.dtype || upd.shape != want) {
    return bad(OpKind::kScatterUpdate, "update must be ", dtype_name(base.dtype), shape_str(want), ", got ", type_str(upd));
  }
  return base;
}

Result<TensorType> infer_dus(const Params& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kDynamicUpdateSlice;
  const TensorType& base = in[0];
  const TensorType& upd = in[1];
  const TensorType& start = in[2];
  const int64_t r = static_cast<int64_t>(base.shape.size());
  if (upd.dtype != base.dtype || static_cast<int64_t>(upd.shape.size()) != r) {
    return bad(op, "update ", type_str(upd), " does not match base ", type_str(base));
  }
  if (p.axis < 0 || p.axis >= r) return bad(op, "axis ", p.axis, " out of range for ", type_str(base));
  for (int64_t a = 0; a < r; ++a) {
    const bool ok = a == p.axis ? upd.shape[a] <= base.shape[a] : upd.shape[a] == base.shape[a];
    if (!ok) return bad(op, "update ", type_str(upd), " does not fit base ", type_str(base), " on axis ", a);
  }
  Result<int64_t> n = checked_numel(start.shape);
  if (start.dtype != DType::kI32 || !n || *n != 1) {
    return bad(op, "start must be a single i32, got ", type_str(start));
  }
  return base;
}

Result<TensorType> infer_matmul(std::span<const TensorType> in) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  const OpKind op = OpKind::kMatMul;
  if (a.dtype != b.dtype || !is_float(a.dtype)) return bad(op, "needs equal float dtypes, got ", type_str(a), " x ", type_str(b));
  if (a.shape.size() < 2 || b.shape.size() < 2) return bad(op, "operands need rank >= 2: ", type_str(a), " x ", type_str(b));
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  const int64_t kb = b.shape[b.shape.size() - 2], n = b.shape.back();
  if (k != kb) return bad(op, "contracting dims differ: ", type_str(a), " x ", type_str(b));
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Result<Shape> batch = broadcast_shapes(ba, bb);
  if (!batch) return batch.take_error().context("matmul batch axes");
  TensorType out{a.dtype, *batch};
  out.shape.push_back(m);
  out.shape.push_back(n);
  return out;
}

Result<TensorType> infer_all_reduce(const TensorType& x) {
  if (x.dtype != DType::kF32) return bad(OpKind::kAllReduce, "sums f32 only, got ", type_str(x));
  return x;
}

}  // namespace

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da < 0 || db < 0) return invalid_input("negative dimension in ", shape_str(a), " or ", shape_str(b));
    if (da != db && da != 1 && db != 1) {
      return invalid_input("shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Result<TensorType> infer(OpKind op, const Params& p, std::span<const TensorType> in) {
  if (is_fused(op)) return infer_fused(op, p, in);
  for (const TensorType& t : in) {
    Status s = check_shape(op, t.shape);
    if (!s) return s.take_error();
    if (is_block_quant(t.dtype) && op != OpKind::kCast) {
      return bad(op, "block-quantized operand ", type_str(t), " must be cast to a float dtype first");
    }
  }
  if (is_unary(op)) {
    Status s = check_arity(op, in, 1);
    if (!s) return s.take_error();
    return infer_unary(op, in[0]);
  }
  if (is_binary(op)) {
    Status s = check_arity(op, in, 2);
    if (!s) return s.take_error();
    return infer_binary(op, p, in[0], in[1]);
  }
  size_t arity = 1;
  switch (op) {
    case OpKind::kSelect: case OpKind::kScatterUpdate: case OpKind::kDynamicUpdateSlice: arity = 3; break;
    case OpKind::kGather: case OpKind::kMatMul: arity = 2; break;
    case OpKind::kIota: arity = 0; break;
    case OpKind::kConcat: arity = in.size(); break;
    default: break;
  }
  Status s = check_arity(op, in, arity);
  if (!s) return s.take_error();
  switch (op) {
    case OpKind::kSelect: return infer_select(in);
    case OpKind::kReduceSum: case OpKind::kReduceMax: return infer_reduce(op, p, in[0]);
    case OpKind::kReshape: return infer_reshape(p, in[0]);
    case OpKind::kTranspose: return infer_transpose(p, in[0]);
    case OpKind::kBroadcast: return infer_broadcast(p, in[0]);
    case OpKind::kSlice: return infer_slice(p, in[0]);
    case OpKind::kConcat: return infer_concat(p, in);
    case OpKind::kIota: return infer_iota(p);
    case OpKind::kCast: return infer_cast(p, in[0]);
    case OpKind::kGather: return infer_gather(in);
    case OpKind::kScatterUpdate: return infer_scatter(in);
    case OpKind::kDynamicUpdateSlice: return infer_dus(p, in);
    case OpKind::kMatMul: return infer_matmul(in);
    case OpKind::kAllReduce: return infer_all_reduce(in[0]);
    default: break;
  }
  return internal_error("infer: no typing rule for ", op_name(op));
}

}  // namespace kvf::ir
