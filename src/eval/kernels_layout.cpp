// Layout primitives and reductions: reduce_sum/max, reshape, transpose, broadcast, slice, concat.
#include <cmath>
#include <limits>

#include "eval/kernels.h"

namespace kvf::eval {
namespace {

Result<Buffer> fresh(const KernelArgs& a) { return Buffer::zeros(a.out_type.dtype, a.out_type.shape); }

// Row-major index -> multi-index.
void unravel(int64_t i, const Shape& shape, std::vector<int64_t>& idx) {
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] ? i % shape[k] : 0;
    i = shape[k] ? i / shape[k] : 0;
  }
}

}  // namespace

Result<Buffer> eval_reduce(const KernelArgs& a) {
  const Buffer& x = *a.in[0];
  const bool is_max = a.eqn.op == ir::OpKind::kReduceMax;
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t ax : a.eqn.params.axes) reduced[static_cast<size_t>(ax)] = true;
  // Accumulate into the keepdim shape, then reinterpret as the declared shape.
  Shape kept = x.shape;
  for (size_t k = 0; k < kept.size(); ++k) {
    if (reduced[k]) kept[k] = 1;
  }
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  // An empty max is -inf for floats and the smallest i32 for integers (no -inf in an i32).
  const double lowest = x.dtype == DType::kI32 ? -2147483648.0 : -std::numeric_limits<double>::infinity();
  const double init = is_max ? lowest : 0.0;
  std::fill(out->data.begin(), out->data.end(), init);
  const Shape kept_strides = contiguous_strides(kept);
  std::vector<int64_t> idx(x.shape.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    unravel(i, x.shape, idx);
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k) o += reduced[k] ? 0 : idx[k] * kept_strides[k];
    double& acc = out->data[static_cast<size_t>(o)];
    const double v = x.data[static_cast<size_t>(i)];
    if (!is_max) acc += v;
    else if (std::isnan(v) || std::isnan(acc)) acc = std::numeric_limits<double>::quiet_NaN();
    else if (v > acc) acc = v;
  }
  // i32 sums wrap like i32 add (the f64 sum is exact, so wrapping once at the end is enough).
  if (!is_max && a.out_type.dtype == DType::kI32) {
    for (double& v : out->data) {
      v = static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v))));
    }
  }
  return out;
}

Result<Buffer> eval_reshape(const KernelArgs& a) {
  Buffer out = *a.in[0];
  out.shape = a.out_type.shape;
  return out;
}

Result<Buffer> eval_transpose(const KernelArgs& a) {
  const Buffer& x = *a.in[0];
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const std::vector<int64_t>& perm = a.eqn.params.axes;
  const Shape in_strides = contiguous_strides(x.shape);
  std::vector<int64_t> idx(perm.size());
  for (int64_t i = 0; i < out->numel(); ++i) {
    unravel(i, out->shape, idx);  // idx over the output's axes; output axis k is input axis perm[k]
    int64_t src = 0;
    for (size_t k = 0; k < perm.size(); ++k) src += idx[k] * in_strides[static_cast<size_t>(perm[k])];
    out->data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(src)];
  }
  return out;
}

Result<Buffer> eval_broadcast(const KernelArgs& a) {
  const Buffer& x = *a.in[0];
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  for_each_broadcast(out->shape, {x.shape}, [&](int64_t i, std::span<const int64_t> o) {
    out->data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(o[0])];
  });
  return out;
}

Result<Buffer> eval_slice(const KernelArgs& a) {
  const Buffer& x = *a.in[0];
  const ir::Params& p = a.eqn.params;
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const Shape in_strides = contiguous_strides(x.shape);
  std::vector<int64_t> idx(x.shape.size());
  for (int64_t i = 0; i < out->numel(); ++i) {
    unravel(i, out->shape, idx);
    int64_t src = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const int64_t step = p.steps.empty() ? 1 : p.steps[k];
      src += (p.starts[k] + idx[k] * step) * in_strides[k];
    }
    out->data[static_cast<size_t>(i)] = x.data[static_cast<size_t>(src)];
  }
  return out;
}

Result<Buffer> eval_concat(const KernelArgs& a) {
  Result<Buffer> out = fresh(a);
  if (!out) return out;
  const auto axis = static_cast<size_t>(a.eqn.params.axis);
  const Shape& s = out->shape;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= s[k];
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  // Each operand contributes a [outer, its_axis * inner] block per outer row.
  int64_t col = 0;
  const int64_t row_len = s[axis] * inner;
  for (const Buffer* part : a.in) {
    const int64_t len = part->shape[axis] * inner;
    for (int64_t r = 0; r < outer; ++r) {
      for (int64_t j = 0; j < len; ++j) {
        out->data[static_cast<size_t>(r * row_len + col + j)] = part->data[static_cast<size_t>(r * len + j)];
      }
    }
    col += len;
  }
  return out;
}

}  // namespace kvf::eval
