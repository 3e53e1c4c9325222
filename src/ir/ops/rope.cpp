// Rotary position embeddings: angle tables from Slot::Pos, both pairings, partial rotary.
#include <cmath>

#include "ir/ops.h"

namespace kvf::ir::ops {

std::vector<float> rope_inv_freq(const RopeSpec& spec) {
  if (!spec.inv_freq.empty()) return spec.inv_freq;
  const int64_t rot = spec.rotary_dim > 0 ? spec.rotary_dim : spec.head_dim;
  std::vector<float> inv(static_cast<size_t>(rot / 2));
  for (int64_t i = 0; i < rot / 2; ++i) {
    // As HF computes it: the exponent in f32, the power in f32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rot);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(spec.theta), expo);
  }
  return inv;
}

RopeTables rope_tables(V pos, const RopeSpec& spec, const std::string& name) {
  Builder& b = *pos.b;
  RopeTables t;
  t.layout = spec.layout;
  t.rotary_dim = spec.rotary_dim > 0 ? spec.rotary_dim : spec.head_dim;
  if (t.rotary_dim % 2 != 0 || t.rotary_dim > spec.head_dim) {
    b.fail(invalid_input("rope: rotary dim ", t.rotary_dim, " must be even and <= head dim ", spec.head_dim));
  }
  std::vector<float> inv = rope_inv_freq(spec);
  const int64_t half = static_cast<int64_t>(inv.size());
  if (half * 2 != t.rotary_dim) b.fail(invalid_input("rope: ", half, " frequencies for rotary dim ", t.rotary_dim));
  Result<HostTensor> inv_t = HostTensor::from_f32({half}, inv);
  if (!inv_t) {
    b.fail(inv_t.take_error());
    return t;
  }
  const int64_t n = pos.dim(0);
  V angles = b.reshape(b.cast(pos, DType::kF32), {n, 1}) * b.constant(name, std::move(*inv_t));  // [T, rot/2]
  if (spec.layout == RopeLayout::kInterleaved) angles = b.reshape(angles, {n, half, 1});
  t.cos = b.unary(OpKind::kCos, angles);
  t.sin = b.unary(OpKind::kSin, angles);
  return t;
}

V apply_rope(V x, const RopeTables& t) {
  if (!x.valid()) return x;  // a failed trace: poison has no axes to rotate
  Builder& b = *x.b;
  const int64_t rot = t.rotary_dim, dim = x.dim(-1), half = rot / 2;
  std::vector<V> parts;
  if (t.layout == RopeLayout::kHalf) {
    V x1 = b.slice_axis(x, -1, 0, half);
    V x2 = b.slice_axis(x, -1, half, rot);
    V x1c = x1 * t.cos;
    V x2s = x2 * t.sin;
    parts.push_back(x1c - x2s);
    V x2c = x2 * t.cos;
    V x1s = x1 * t.sin;
    parts.push_back(x2c + x1s);
  } else {
    Shape pairs = x.shape();
    pairs.back() = half;
    pairs.push_back(2);
    V xr = b.reshape(rot == dim ? x : b.slice_axis(x, -1, 0, rot), pairs);  // [..., rot/2, 2]
    V even = b.slice_axis(xr, -1, 0, 1);
    V odd = b.slice_axis(xr, -1, 1, 2);
    V ec = even * t.cos;
    V os = odd * t.sin;
    V first = ec - os;
    V es = even * t.sin;
    V oc = odd * t.cos;
    V second = es + oc;
    V rotated = b.concat({first, second}, -1);
    Shape flat = x.shape();
    flat.back() = rot;
    parts.push_back(b.reshape(rotated, flat));
  }
  if (rot < dim) parts.push_back(b.slice_axis(x, -1, rot, dim));
  return parts.size() == 1 ? parts[0] : b.concat(parts, -1);
}

}  // namespace kvf::ir::ops
