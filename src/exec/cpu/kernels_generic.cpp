#include "exec/cpu/kernels_generic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvf::exec::cpu {

using ir::OpKind;

namespace {

constexpr int kMaxRank = 8;
constexpr int64_t kParallelElems = 1 << 15;

// Bytes of one element of a plain (non-block) dtype: what the data-movement kernels copy.
int64_t elem_bytes(DType dt) { return block_bytes(dt); }

// Output-shaped iteration with per-operand element strides (0 on broadcast axes).
struct Walk {
  int rank = 1;
  int nops = 0;
  int64_t shape[kMaxRank] = {1};
  int64_t stride[3][kMaxRank] = {};
  int64_t rows = 1;  // product of all but the last axis
};

Walk make_walk(const Shape& out, std::initializer_list<const Shape*> ops) {
  Walk w;
  w.rank = std::max<int>(1, static_cast<int>(out.size()));
  for (int a = 0; a < w.rank; ++a) w.shape[a] = out.empty() ? 1 : out[static_cast<size_t>(a)];
  for (const Shape* s : ops) broadcast_strides(*s, out, w.stride[w.nops++]);
  for (int a = 0; a < w.rank - 1; ++a) w.rows *= w.shape[a];
  return w;
}

// fn(out_offset, operand offsets, inner length, inner strides) for each output row in [r0, r1).
template <class Fn>
void walk_rows(const Walk& w, int64_t r0, int64_t r1, Fn&& fn) {
  const int64_t inner = w.shape[w.rank - 1];
  int64_t idx[kMaxRank] = {};
  int64_t rest = r0;
  for (int a = w.rank - 2; a >= 0; --a) {
    idx[a] = rest % w.shape[a];
    rest /= w.shape[a];
  }
  int64_t inner_st[3] = {};
  for (int k = 0; k < w.nops; ++k) inner_st[k] = w.stride[k][w.rank - 1];
  for (int64_t r = r0; r < r1; ++r) {
    int64_t off[3] = {};
    for (int k = 0; k < w.nops; ++k) {
      for (int a = 0; a < w.rank - 1; ++a) off[k] += idx[a] * w.stride[k][a];
    }
    fn(r * inner, off, inner, inner_st);
    for (int a = w.rank - 2; a >= 0; --a) {
      if (++idx[a] < w.shape[a]) break;
      idx[a] = 0;
    }
  }
}

template <class Fn>
void walk(ThreadPool& pool, const Walk& w, Fn&& fn) {
  const int64_t total = w.rows * w.shape[w.rank - 1];
  if (total < kParallelElems || w.rows < 2) {
    walk_rows(w, 0, w.rows, fn);
    return;
  }
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1) { walk_rows(w, r0, r1, fn); },
                    std::max<int64_t>(1, kParallelElems / std::max<int64_t>(1, w.shape[w.rank - 1])));
}

float unary_f32(OpKind op, float x) {
  switch (op) {
    case OpKind::kNeg: return -x;
    case OpKind::kExp: return std::exp(x);
    case OpKind::kLog: return std::log(x);
    case OpKind::kSqrt: return std::sqrt(x);
    case OpKind::kRsqrt: return 1.0f / std::sqrt(x);
    case OpKind::kTanh: return std::tanh(x);
    case OpKind::kErf: return std::erf(x);
    case OpKind::kAbs: return std::fabs(x);
    case OpKind::kSin: return std::sin(x);
    case OpKind::kCos: return std::cos(x);
    case OpKind::kRecip: return 1.0f / x;
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

Status run_unary(const ir::Eqn& e, const Ref& x, const Ref& out) {
  if (x.dtype() == DType::kI32) {
    for (int64_t i = 0; i < x.numel; ++i) {
      const int32_t v = x.i32()[i];
      out.i32()[i] = e.op == OpKind::kNeg ? -v : (v < 0 ? -v : v);
    }
    return {};
  }
  const float* src = x.f32();
  float* dst = out.f32();
  const OpKind op = e.op;
  if (op == OpKind::kExp) {
    for (int64_t i = 0; i < x.numel; ++i) dst[i] = std::exp(src[i]);
  } else {
    for (int64_t i = 0; i < x.numel; ++i) dst[i] = unary_f32(op, src[i]);
  }
  return {};
}

template <class T, class Op>
void binary_loop(ThreadPool& pool, const Walk& w, const T* a, const T* b, T* out, Op op) {
  walk(pool, w, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* st) {
    const T* pa = a + off[0];
    const T* pb = b + off[1];
    T* po = out + o;
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
    } else if (st[0] == 1 && st[1] == 0) {
      const T y = pb[0];
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], y);
    } else {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i * st[0]], pb[i * st[1]]);
    }
  });
}

template <class T>
Status arith(ThreadPool& pool, OpKind op, const Walk& w, const T* a, const T* b, T* out) {
  switch (op) {
    case OpKind::kAdd: binary_loop(pool, w, a, b, out, [](T x, T y) { return x + y; }); return {};
    case OpKind::kSub: binary_loop(pool, w, a, b, out, [](T x, T y) { return x - y; }); return {};
    case OpKind::kMul: binary_loop(pool, w, a, b, out, [](T x, T y) { return x * y; }); return {};
    case OpKind::kMax: binary_loop(pool, w, a, b, out, [](T x, T y) { return x > y || x != x ? x : y; }); return {};
    case OpKind::kMin: binary_loop(pool, w, a, b, out, [](T x, T y) { return x < y || x != x ? x : y; }); return {};
    case OpKind::kDiv:
      if constexpr (std::is_floating_point_v<T>) {
        binary_loop(pool, w, a, b, out, [](T x, T y) { return x / y; });
        return {};
      } else {
        bool zero = false;
        binary_loop(pool, w, a, b, out, [&zero](T x, T y) {
          if (y == 0) zero = true;
          return y == 0 ? T{0} : x / y;
        });
        if (zero) return invalid_input("div: integer division by zero");
        return {};
      }
    default: return internal_error("exec/cpu: ", ir::op_name(op), " is not arithmetic");
  }
}

template <class T>
void compare(const ir::Eqn& e, const Walk& w, const T* a, const T* b, uint8_t* out, ThreadPool& pool) {
  const ir::CmpDir dir = e.params.cmp;
  walk(pool, w, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      const T x = a[off[0] + i * st[0]], y = b[off[1] + i * st[1]];
      bool r = false;
      switch (dir) {
        case ir::CmpDir::kEq: r = x == y; break;
        case ir::CmpDir::kNe: r = x != y; break;
        case ir::CmpDir::kLt: r = x < y; break;
        case ir::CmpDir::kLe: r = x <= y; break;
        case ir::CmpDir::kGt: r = x > y; break;
        case ir::CmpDir::kGe: r = x >= y; break;
      }
      out[o + i] = r;
    }
  });
}

Status run_binary(const ir::Eqn& e, const Ref& a, const Ref& b, const Ref& out, ThreadPool& pool) {
  const Walk w = make_walk(out.shape(), {&a.shape(), &b.shape()});
  if (e.op == OpKind::kCompare) {
    switch (a.dtype()) {
      case DType::kF32: compare(e, w, a.f32(), b.f32(), out.pred(), pool); return {};
      case DType::kI32: compare(e, w, a.i32(), b.i32(), out.pred(), pool); return {};
      case DType::kBool: compare(e, w, a.pred(), b.pred(), out.pred(), pool); return {};
      default: break;
    }
  } else if (e.op == OpKind::kAnd) {
    binary_loop(pool, w, a.pred(), b.pred(), out.pred(), [](uint8_t x, uint8_t y) -> uint8_t { return x & y; });
    return {};
  } else if (e.op == OpKind::kOr) {
    binary_loop(pool, w, a.pred(), b.pred(), out.pred(), [](uint8_t x, uint8_t y) -> uint8_t { return x | y; });
    return {};
  } else if (a.dtype() == DType::kF32) {
    return arith(pool, e.op, w, a.f32(), b.f32(), out.f32());
  } else if (a.dtype() == DType::kI32) {
    return arith(pool, e.op, w, a.i32(), b.i32(), out.i32());
  }
  return unsupported("exec/cpu: ", ir::op_name(e.op), " over ", dtype_name(a.dtype()));
}

template <class T>
void select_loop(ThreadPool& pool, const Walk& w, const uint8_t* p, const T* a, const T* b, T* out) {
  walk(pool, w, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      out[o + i] = p[off[0] + i * st[0]] ? a[off[1] + i * st[1]] : b[off[2] + i * st[2]];
    }
  });
}

Status run_select(std::span<const Ref> in, const Ref& out, ThreadPool& pool) {
  const Walk w = make_walk(out.shape(), {&in[0].shape(), &in[1].shape(), &in[2].shape()});
  switch (out.dtype()) {
    case DType::kF32: case DType::kI32:
      select_loop(pool, w, in[0].pred(), in[1].i32(), in[2].i32(), out.i32());  // same 4-byte words
      return {};
    case DType::kBool: select_loop(pool, w, in[0].pred(), in[1].pred(), in[2].pred(), out.pred()); return {};
    default: return unsupported("exec/cpu: select over ", dtype_name(out.dtype()));
  }
}

Status run_broadcast(const Ref& x, const Ref& out, ThreadPool& pool) {
  const Walk w = make_walk(out.shape(), {&x.shape()});
  const int64_t eb = elem_bytes(out.dtype());
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(out.data);
  walk(pool, w, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* st) {
    if (st[0] == 1) {
      std::memcpy(dst + o * eb, src + off[0] * eb, static_cast<size_t>(n * eb));
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + (o + i) * eb, src + off[0] * eb, static_cast<size_t>(eb));
  });
  return {};
}

template <class T>
void reduce_loop(const Ref& x, const Ref& out, const std::vector<bool>& reduced, bool is_max) {
  const Shape& s = x.shape();
  const int rank = static_cast<int>(s.size());
  // Output offset of each input element: strides of the kept axes, 0 on reduced ones.
  int64_t ost[kMaxRank] = {};
  int64_t st = 1;
  for (int a = rank - 1; a >= 0; --a) {
    if (reduced[static_cast<size_t>(a)]) continue;
    ost[a] = st;
    st *= s[static_cast<size_t>(a)];
  }
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  std::vector<Acc> acc(static_cast<size_t>(out.numel), is_max ? std::numeric_limits<Acc>::lowest() : Acc{0});
  if constexpr (std::is_floating_point_v<T>) {
    if (is_max) std::fill(acc.begin(), acc.end(), -std::numeric_limits<double>::infinity());
  }
  const T* src = static_cast<const T*>(x.data);
  int64_t idx[kMaxRank] = {};
  for (int64_t i = 0; i < x.numel; ++i) {
    int64_t o = 0;
    for (int a = 0; a < rank; ++a) o += idx[a] * ost[a];
    Acc& r = acc[static_cast<size_t>(o)];
    const Acc v = static_cast<Acc>(src[i]);
    r = is_max ? (v > r || v != v ? v : r) : r + v;
    for (int a = rank - 1; a >= 0; --a) {
      if (++idx[a] < s[static_cast<size_t>(a)]) break;
      idx[a] = 0;
    }
  }
  T* dst = static_cast<T*>(out.data);
  for (int64_t i = 0; i < out.numel; ++i) dst[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
}

// Reduce over the last axis only: the common case (norms, softmax), no index bookkeeping.
void reduce_last_f32(const Ref& x, const Ref& out, bool is_max) {
  const int64_t n = x.dim(-1), rows = x.numel / std::max<int64_t>(n, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.f32() + r * n;
    if (is_max) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) m = row[i] > m || row[i] != row[i] ? row[i] : m;
      out.f32()[r] = m;
    } else {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += row[i];
      out.f32()[r] = static_cast<float>(s);
    }
  }
}

Status run_reduce(const ir::Eqn& e, const Ref& x, const Ref& out) {
  std::vector<bool> reduced(x.shape().size(), false);
  for (int64_t a : e.params.axes) reduced[static_cast<size_t>(a)] = true;
  const bool is_max = e.op == OpKind::kReduceMax;
  const bool last_only = e.params.axes.size() == 1 && e.params.axes[0] == x.rank() - 1;
  if (x.dtype() == DType::kF32 && last_only) {
    reduce_last_f32(x, out, is_max);
  } else if (x.dtype() == DType::kF32) {
    reduce_loop<float>(x, out, reduced, is_max);
  } else if (x.dtype() == DType::kI32) {
    reduce_loop<int32_t>(x, out, reduced, is_max);
  } else {
    return unsupported("exec/cpu: reduce over ", dtype_name(x.dtype()));
  }
  return {};
}

// Copies by an output walk over input strides: transpose and slice are both this.
void strided_copy(const Ref& out, const int64_t* in_stride, int64_t in_base, const void* src_v, ThreadPool& pool) {
  Walk w = make_walk(out.shape(), {});
  w.nops = 1;
  for (int a = 0; a < w.rank; ++a) w.stride[0][a] = out.shape().empty() ? 0 : in_stride[a];
  const int64_t eb = elem_bytes(out.dtype());
  const auto* src = static_cast<const uint8_t*>(src_v);
  auto* dst = static_cast<uint8_t*>(out.data);
  walk(pool, w, [&](int64_t o, const int64_t* off, int64_t n, const int64_t* st) {
    const int64_t base = in_base + off[0];
    if (st[0] == 1) {
      std::memcpy(dst + o * eb, src + base * eb, static_cast<size_t>(n * eb));
    } else if (eb == 4) {
      auto* d = reinterpret_cast<uint32_t*>(dst) + o;
      const auto* s = reinterpret_cast<const uint32_t*>(src) + base;
      for (int64_t i = 0; i < n; ++i) d[i] = s[i * st[0]];
    } else if (eb == 2) {
      auto* d = reinterpret_cast<uint16_t*>(dst) + o;
      const auto* s = reinterpret_cast<const uint16_t*>(src) + base;
      for (int64_t i = 0; i < n; ++i) d[i] = s[i * st[0]];
    } else {
      for (int64_t i = 0; i < n; ++i) dst[o + i] = src[base + i * st[0]];
    }
  });
}

void contiguous_strides(const Shape& s, int64_t* st) {
  int64_t acc = 1;
  for (int a = static_cast<int>(s.size()) - 1; a >= 0; --a) {
    st[a] = acc;
    acc *= s[static_cast<size_t>(a)];
  }
}

void run_transpose(const ir::Eqn& e, const Ref& x, const Ref& out, ThreadPool& pool) {
  int64_t xs[kMaxRank], st[kMaxRank];
  contiguous_strides(x.shape(), xs);
  for (size_t a = 0; a < e.params.axes.size(); ++a) st[a] = xs[e.params.axes[a]];
  strided_copy(out, st, 0, x.data, pool);
}

void run_slice(const ir::Eqn& e, const Ref& x, const Ref& out, ThreadPool& pool) {
  int64_t xs[kMaxRank], st[kMaxRank];
  contiguous_strides(x.shape(), xs);
  int64_t base = 0;
  for (size_t a = 0; a < x.shape().size(); ++a) {
    const int64_t step = e.params.steps.empty() ? 1 : e.params.steps[a];
    base += e.params.starts[a] * xs[a];
    st[a] = xs[a] * step;
  }
  strided_copy(out, st, base, x.data, pool);
}

void run_concat(const ir::Eqn& e, std::span<const Ref> in, const Ref& out) {
  const auto axis = static_cast<size_t>(e.params.axis);
  const int64_t eb = elem_bytes(out.dtype());
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= out.shape()[a];
  for (size_t a = axis + 1; a < out.shape().size(); ++a) inner *= out.shape()[a];
  const int64_t out_row = out.shape()[axis] * inner * eb;
  auto* dst = static_cast<uint8_t*>(out.data);
  int64_t at = 0;
  for (const Ref& x : in) {
    const int64_t row = x.shape()[axis] * inner * eb;
    const auto* src = static_cast<const uint8_t*>(x.data);
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row + at, src + o * row, static_cast<size_t>(row));
    at += row;
  }
}

void run_iota(const ir::Eqn& e, const Ref& out) {
  const Shape& s = out.shape();
  const auto axis = static_cast<size_t>(e.params.axis);
  int64_t inner = 1;
  for (size_t a = axis + 1; a < s.size(); ++a) inner *= s[a];
  for (int64_t i = 0; i < out.numel; ++i) {
    const int64_t v = (i / inner) % s[axis];
    if (out.dtype() == DType::kI32) out.i32()[i] = static_cast<int32_t>(v);
    else out.f32()[i] = static_cast<float>(v);
  }
}

Status run_cast(const Ref& x, const Ref& out) {
  const DType from = x.dtype(), to = out.dtype();
  if (to == DType::kF32 && (is_float(from) || is_block_quant(from))) return dequantize_row(from, x.data, out.f32(), x.numel);
  if (from == DType::kF32 && (to == DType::kF16 || to == DType::kBF16)) {  // rows entering a half-precision cache
    auto* dst = static_cast<uint16_t*>(out.data);
    const float* src = x.f32();
    if (to == DType::kF16) {
      for (int64_t i = 0; i < x.numel; ++i) dst[i] = f32_to_f16_bits(src[i]);
    } else {
      for (int64_t i = 0; i < x.numel; ++i) dst[i] = f32_to_bf16_bits(src[i]);
    }
    return {};
  }
  for (int64_t i = 0; i < x.numel; ++i) {
    double v = 0;
    switch (from) {
      case DType::kF32: v = x.f32()[i]; break;
      case DType::kI32: v = x.i32()[i]; break;
      case DType::kBool: v = x.pred()[i]; break;
      default: return unsupported("exec/cpu: cast from ", dtype_name(from));
    }
    switch (to) {
      case DType::kF32: out.f32()[i] = static_cast<float>(v); break;
      case DType::kBool: out.pred()[i] = v != 0; break;
      case DType::kI32:
        if (std::isnan(v) || std::trunc(v) < -2147483648.0 || std::trunc(v) > 2147483647.0) {
          return invalid_input("cast: ", v, " does not fit i32 (element ", i, ")");
        }
        out.i32()[i] = static_cast<int32_t>(std::trunc(v));
        break;
      default: return unsupported("exec/cpu: cast to ", dtype_name(to));
    }
  }
  return {};
}

Status run_gather(const Ref& table, const Ref& idx, const Ref& out) {
  const int64_t rows = table.dim(0), row = table.numel / std::max<int64_t>(rows, 1);
  const int64_t eb = elem_bytes(out.dtype());
  for (int64_t i = 0; i < idx.numel; ++i) {
    const int32_t r = idx.i32()[i];
    if (r < 0 || r >= rows) return invalid_input("gather: index ", r, " at position ", i, " is outside a table of ", rows, " rows");
    auto* dst = static_cast<uint8_t*>(out.data) + i * row * eb;
    if (table.dtype() == out.dtype()) {
      std::memcpy(dst, static_cast<const uint8_t*>(table.data) + r * row * eb, static_cast<size_t>(row * eb));
    } else {  // a stored (f16, q8_0...) table cast to f32 lazily: only the rows read
      Result<int64_t> rb = storage_bytes(table.dtype(), row);
      if (!rb) return rb.take_error();
      Status s = dequantize_row(table.dtype(), static_cast<const uint8_t*>(table.data) + r * *rb,
                                reinterpret_cast<float*>(dst), row);
      if (!s) return s;
    }
  }
  return {};
}

Status run_update_slice(const ir::Eqn& e, std::span<const Ref> in, const Ref& out) {
  const Ref &base = in[0], &upd = in[1];
  const int32_t start = in[2].i32()[0];
  const auto axis = static_cast<size_t>(e.params.axis);
  const int64_t extent = out.shape()[axis], n = upd.shape()[axis];
  if (start < 0) return invalid_input("dynamic_update_slice: negative start ", start);
  if (start + n > extent) {
    return capacity("dynamic_update_slice: ", n, " rows at ", start, " overflow axis ", axis, " of length ", extent);
  }
  const int64_t eb = elem_bytes(out.dtype());
  if (out.data != base.data) std::memcpy(out.data, base.data, static_cast<size_t>(out.numel * eb));
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= out.shape()[k];
  for (size_t k = axis + 1; k < out.shape().size(); ++k) inner *= out.shape()[k];
  auto* dst = static_cast<uint8_t*>(out.data);
  const auto* src = static_cast<const uint8_t*>(upd.data);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + (o * extent + start) * inner * eb, src + o * n * inner * eb, static_cast<size_t>(n * inner * eb));
  }
  return {};
}

Status run_scatter(std::span<const Ref> in, const Ref& out) {
  const Ref &base = in[0], &idx = in[1], &upd = in[2];
  const int64_t rows = out.dim(0), row = out.numel / std::max<int64_t>(rows, 1);
  const int64_t eb = elem_bytes(out.dtype());
  for (int64_t i = 0; i < idx.numel; ++i) {  // checked before anything is written
    const int32_t r = idx.i32()[i];
    if (r < -1 || r >= rows) return invalid_input("scatter_update: slot ", r, " is outside ", rows, " rows");
    for (int64_t j = 0; j < i; ++j) {
      if (r >= 0 && idx.i32()[j] == r) return invalid_input("scatter_update: slot ", r, " is written twice");
    }
  }
  if (out.data != base.data) std::memcpy(out.data, base.data, static_cast<size_t>(out.numel * eb));
  for (int64_t i = 0; i < idx.numel; ++i) {
    const int32_t r = idx.i32()[i];
    if (r < 0) continue;
    std::memcpy(static_cast<uint8_t*>(out.data) + r * row * eb, static_cast<const uint8_t*>(upd.data) + i * row * eb,
                static_cast<size_t>(row * eb));
  }
  return {};
}

void run_matmul(const Ref& a, const Ref& b, const Ref& out, ThreadPool& pool) {
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Walk w = make_walk(batch.empty() ? Shape{1} : batch, {&ab, &bb});
  const int64_t nb = out.numel / (m * n);
  pool.parallel_for(nb * m, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / m, i = r % m;
      // Batch index -> operand matrix offsets (walk of one row).
      int64_t off[2] = {0, 0};
      int64_t rest = bi;
      for (int ax = w.rank - 1; ax >= 0; --ax) {
        const int64_t id = rest % w.shape[ax];
        rest /= w.shape[ax];
        off[0] += id * w.stride[0][ax];
        off[1] += id * w.stride[1][ax];
      }
      const float* ar = a.f32() + off[0] * m * k + i * k;
      const float* bm = b.f32() + off[1] * k * n;
      float* o = out.f32() + r * n;
      std::fill(o, o + n, 0.0f);
      for (int64_t t = 0; t < k; ++t) {
        const float x = ar[t];
        const float* brow = bm + t * n;
        for (int64_t j = 0; j < n; ++j) o[j] += x * brow[j];
      }
    }
  }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * k / 64)));
}

}  // namespace

Status check_primitive(const ir::Eqn& e, std::span<const ir::TensorType> in, const ir::TensorType& out) {
  if (ir::is_fused(e.op)) return internal_error("check_primitive: ", ir::op_name(e.op), " is fused");
  if (out.shape.size() > kMaxRank) return unsupported("exec/cpu: rank ", out.shape.size(), " > ", kMaxRank);
  auto word = [](DType d) { return d == DType::kF32 || d == DType::kI32 || d == DType::kBool; };
  auto half = [](DType d) { return d == DType::kF16 || d == DType::kBF16; };
  if (e.op == OpKind::kCast) {
    if (!word(out.dtype) && !(half(out.dtype) && in[0].dtype == DType::kF32)) {
      return unsupported("exec/cpu: cast from ", dtype_name(in[0].dtype), " to ", dtype_name(out.dtype));
    }
    return {};
  }
  if (e.op == OpKind::kGather) {
    if (!word(out.dtype) && !half(out.dtype)) return unsupported("exec/cpu: gather to ", dtype_name(out.dtype));
    return {};
  }
  // Half-precision values (an f16 KV cache) are moved, never computed on.
  const bool moves = e.op == OpKind::kReshape || e.op == OpKind::kTranspose || e.op == OpKind::kBroadcast ||
                     e.op == OpKind::kSlice || e.op == OpKind::kConcat || e.op == OpKind::kDynamicUpdateSlice ||
                     e.op == OpKind::kScatterUpdate;
  for (const ir::TensorType& t : in) {
    if (!word(t.dtype) && !(moves && half(t.dtype))) return unsupported("exec/cpu: ", ir::op_name(e.op), " over ", ir::type_str(t));
  }
  if (e.op == OpKind::kMatMul && out.dtype != DType::kF32) return unsupported("exec/cpu: matmul over ", ir::type_str(out));
  if (ir::is_unary(e.op) && out.dtype == DType::kBool) return unsupported("exec/cpu: unary over pred");
  return {};
}

Status run_primitive(const ir::Eqn& e, std::span<const Ref> in, const Ref& out, ThreadPool& pool) {
  if (ir::is_unary(e.op)) return run_unary(e, in[0], out);
  if (ir::is_binary(e.op)) return run_binary(e, in[0], in[1], out, pool);
  switch (e.op) {
    case OpKind::kSelect: return run_select(in, out, pool);
    case OpKind::kReduceSum: case OpKind::kReduceMax: return run_reduce(e, in[0], out);
    case OpKind::kReshape:
      if (out.data != in[0].data) std::memcpy(out.data, in[0].data, static_cast<size_t>(out.numel * elem_bytes(out.dtype())));
      return {};
    case OpKind::kTranspose: run_transpose(e, in[0], out, pool); return {};
    case OpKind::kBroadcast: return run_broadcast(in[0], out, pool);
    case OpKind::kSlice: run_slice(e, in[0], out, pool); return {};
    case OpKind::kConcat: run_concat(e, in, out); return {};
    case OpKind::kIota: run_iota(e, out); return {};
    case OpKind::kCast: return run_cast(in[0], out);
    case OpKind::kGather: return run_gather(in[0], in[1], out);
    case OpKind::kScatterUpdate: return run_scatter(in, out);
    case OpKind::kDynamicUpdateSlice: return run_update_slice(e, in, out);
    case OpKind::kMatMul: run_matmul(in[0], in[1], out, pool); return {};
    default: break;
  }
  return internal_error("exec/cpu: no kernel for ", ir::op_name(e.op));
}

}  // namespace kvf::exec::cpu
