// Elementwise primitives: unary math, broadcasting binaries, select, cast, iota.
#include <cmath>
#include <limits>

#include "eval/kernels.h"

namespace kvf::eval {
namespace {

using ir::CmpDir;
using ir::OpKind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Result<Buffer> fresh(const KernelArgs& a) { return Buffer::zeros(a.out_type.dtype, a.out_type.shape); }

double unary_f(OpKind op, double x) {
  switch (op) {
    case OpKind::kNeg: return -x;
    case OpKind::kExp: return std::exp(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1.0 / std::sqrt(x);
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kErf: return std::erf(x);
    case OpKind::kAbs: return std::fabs(x);
    case OpKind::kSin: return std::sin(x);
    case OpKind::kCos: return std::cos(x);
    case OpKind::kRecip: return 1.0 / x;
    default: return kNaN;
  }
}

// Wraps to int32 two's complement, as integer hardware does.
double wrap_i32(int64_t x) { return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(x))); }
// The same for the integer dtype dt (i8 wraps at 8 bits).
double wrap_int(DType dt, int64_t x) {
  if (dt == DType::kI8) return static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(x)));
  return wrap_i32(x);
}

bool compare(CmpDir dir, double x, double y) {
  switch (dir) {
    case CmpDir::kEq: return x == y;
    case CmpDir::kNe: return x != y;
    case CmpDir::kLt: return x < y;
    case CmpDir::kLe: return x <= y;
    case CmpDir::kGt: return x > y;
    case CmpDir::kGe: return x >= y;
  }
  return false;
}

// NaN-propagating max/min (torch.maximum semantics), unlike std::max.
double nan_max(double x, double y) { return std::isnan(x) || std::isnan(y) ? kNaN : (x > y ? x : y); }
double nan_min(double x, double y) { return std::isnan(x) || std::isnan(y) ? kNaN : (x < y ? x : y); }

Result<double> binary_f(OpKind op, CmpDir dir, DType dt, double x, double y) {
  if (op == OpKind::kCompare) return compare(dir, x, y) ? 1.0 : 0.0;
  if (op == OpKind::kAnd) return (x != 0 && y != 0) ? 1.0 : 0.0;
  if (op == OpKind::kOr) return (x != 0 || y != 0) ? 1.0 : 0.0;
  if (op == OpKind::kMax) return nan_max(x, y);
  if (op == OpKind::kMin) return nan_min(x, y);
  if (is_integer(dt)) {
    const auto xi = static_cast<int64_t>(x), yi = static_cast<int64_t>(y);
    switch (op) {
      case OpKind::kAdd: return wrap_int(dt, xi + yi);
      case OpKind::kSub: return wrap_int(dt, xi - yi);
      case OpKind::kMul: return wrap_int(dt, xi * yi);
      case OpKind::kDiv:
        if (yi == 0) return invalid_input("div: integer division by zero");
        return wrap_int(dt, xi / yi);  // truncates toward zero
      default: break;
    }
  }
  switch (op) {
    case OpKind::kAdd: return x + y;
    case OpKind::kSub: return x - y;
    case OpKind::kMul: return x * y;
    case OpKind::kDiv: return x / y;
    default: break;
  }
  return internal_error("binary: unhandled op ", ir::op_name(op));
}

}  // namespace

Result<Buffer> eval_unary(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Buffer& x = *a.in[0];
  const OpKind op = a.eqn.op;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data[static_cast<size_t>(i)];
    double r = unary_f(op, v);
    if (x.dtype == DType::kI32) r = wrap_i32(static_cast<int64_t>(r));  // neg/abs of INT32_MIN wrap
    out->data[static_cast<size_t>(i)] = r;
  }
  return out;
}

Result<Buffer> eval_binary(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Buffer& x = *a.in[0];
  const Buffer& y = *a.in[1];
  std::optional<Error> err;
  for_each_broadcast(out->shape, {x.shape, y.shape}, [&](int64_t i, std::span<const int64_t> o) {
    if (err) return;
    Result<double> r = binary_f(a.eqn.op, a.eqn.params.cmp, x.dtype, x.data[static_cast<size_t>(o[0])],
                                y.data[static_cast<size_t>(o[1])]);
    if (!r) err = r.take_error();
    else out->data[static_cast<size_t>(i)] = *r;
  });
  if (err) return *err;
  return out;
}

Result<Buffer> eval_select(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Buffer& p = *a.in[0];
  const Buffer& t = *a.in[1];
  const Buffer& f = *a.in[2];
  for_each_broadcast(out->shape, {p.shape, t.shape, f.shape}, [&](int64_t i, std::span<const int64_t> o) {
    const bool take = p.data[static_cast<size_t>(o[0])] != 0;
    out->data[static_cast<size_t>(i)] = take ? t.data[static_cast<size_t>(o[1])] : f.data[static_cast<size_t>(o[2])];
  });
  return out;
}

Result<Buffer> eval_cast(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Buffer& x = *a.in[0];
  const DType to = a.out_type.dtype;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data[static_cast<size_t>(i)];
    double r = v;
    if (to == DType::kBool) {
      r = v != 0 ? 1.0 : 0.0;
    } else if (is_integer(to) && is_float(x.dtype)) {
      const double lo = to == DType::kI32 ? -2147483648.0 : -128.0;
      const double hi = to == DType::kI32 ? 2147483647.0 : 127.0;
      r = std::trunc(v);
      if (std::isnan(v) || r < lo || r > hi) {
        return invalid_input("cast: ", v, " does not fit ", dtype_name(to), " (element ", i, ")");
      }
    } else if (to == DType::kI8 && (v < -128 || v > 127)) {
      return invalid_input("cast: ", v, " does not fit i8 (element ", i, ")");
    }
    out->data[static_cast<size_t>(i)] = r;
  }
  return out;
}

Result<Buffer> eval_iota(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Shape& s = a.out_type.shape;
  const auto axis = static_cast<size_t>(a.eqn.params.axis);
  int64_t inner = 1;
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  for (int64_t i = 0; i < out->numel(); ++i) {
    out->data[static_cast<size_t>(i)] = static_cast<double>((i / inner) % s[axis]);
  }
  return out;
}

}  // namespace kvf::eval
