// Typing rules of the fused ops compile/ forms (docs/ir.md, "Fused ops").
#include <algorithm>

#include "ir/infer.h"

namespace kvf::ir {
namespace {

Error bad(OpKind op, const auto&... parts) { return invalid_input(op_name(op), ": ", parts...); }

bool rank_is(const TensorType& t, size_t r) { return t.shape.size() == r; }

// The key/value geometry both forms share: heads, keys and widths.
struct KvShape {
  int64_t hkv = 0, lk = 0, dk = 0, dv = 0;
};

// q, k, v (and, paged, the read map): dtypes, ranks and the agreement of their shapes.
Result<KvShape> check_kv(const AttnParams& p, const TensorType& q, const TensorType& k, const TensorType& v,
                         const TensorType* read) {
  const OpKind op = OpKind::kAttention;
  if (q.dtype != DType::kF32) return bad(op, "q must be f32, got ", type_str(q));
  if (!rank_is(q, 4)) return bad(op, "q must be rank 4, got ", type_str(q));
  for (const TensorType* t : {&k, &v}) {
    if (t->dtype != DType::kF32 && t->dtype != DType::kF16) return bad(op, "k/v must be f32 or f16, got ", type_str(*t));
  }
  if (k.dtype != v.dtype) return bad(op, "k and v dtypes differ: ", type_str(k), " vs ", type_str(v));
  const int64_t batch = q.shape[0];
  KvShape kv;
  if (read == nullptr) {
    if (!rank_is(k, 4) || !rank_is(v, 4)) {
      return bad(op, "q, k, v must be rank 4, got ", type_str(q), ", ", type_str(k), ", ", type_str(v));
    }
    if (k.shape[0] != batch || v.shape[0] != batch) return bad(op, "batch differs among q, k, v");
    if (v.shape[1] != k.shape[1] || v.shape[2] != k.shape[2]) {
      return bad(op, "k ", type_str(k), " and v ", type_str(v), " disagree");
    }
    kv = {k.shape[1], k.shape[2], k.shape[3], v.shape[3]};
  } else {
    if (!rank_is(k, 3) || !rank_is(v, 3)) {
      return bad(op, "paged k and v must be pools [S, Hkv, D], got ", type_str(k), " and ", type_str(v));
    }
    if (v.shape[0] != k.shape[0] || v.shape[1] != k.shape[1]) {
      return bad(op, "the pools k ", type_str(k), " and v ", type_str(v), " disagree on [S, Hkv]");
    }
    if (read->dtype != DType::kI32 || !rank_is(*read, 2) || read->shape[0] != batch) {
      return bad(op, "read must be i32[", batch, ", Lk], got ", type_str(*read));
    }
    kv = {k.shape[1], read->shape[1], k.shape[2], v.shape[2]};
  }
  if (p.n_rep < 1 || kv.hkv * p.n_rep != q.shape[1]) {
    return bad(op, q.shape[1], " query heads are not ", kv.hkv, " key heads x n_rep ", p.n_rep);
  }
  return kv;
}

// The split key's shared part: dense [B, 1, Lk, s], or paged the pool [S, 1, s] read through
// the same map as k. Returns s.
Result<int64_t> shared_width(const AttnParams& p, const TensorType& k, const TensorType& ks, int64_t batch,
                             int64_t lk) {
  const OpKind op = OpKind::kAttention;
  if (p.has_read) {
    if (!rank_is(ks, 3) || ks.dtype != k.dtype || ks.shape[0] != k.shape[0] || ks.shape[1] != 1) {
      return bad(op, "paged k_shared must be the pool ", dtype_name(k.dtype), "[", k.shape[0], ",1,s], got ",
                 type_str(ks));
    }
    return ks.shape[2];
  }
  if (!rank_is(ks, 4) || ks.dtype != k.dtype || ks.shape[0] != batch || ks.shape[1] != 1 || ks.shape[2] != lk) {
    return bad(op, "k_shared must be ", dtype_name(k.dtype), "[", batch, ",1,", lk, ",s], got ", type_str(ks));
  }
  return ks.shape[3];
}

Result<TensorType> infer_attention(const AttnParams& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kAttention;
  const size_t want = 3 + p.has_shared + p.has_mask + p.has_len + p.has_read;
  if (in.size() != want) return bad(op, "expects ", want, " operands, got ", in.size());
  const TensorType &q = in[0], &k = in[1], &v = in[2];
  Result<KvShape> kv = check_kv(p, q, k, v, p.has_read ? &in.back() : nullptr);
  if (!kv) return kv.take_error();
  const int64_t batch = q.shape[0], hq = q.shape[1], lq = q.shape[2], lk = kv->lk;
  int64_t key_width = kv->dk;
  size_t next = 3;
  if (p.has_shared) {
    Result<int64_t> s = shared_width(p, k, in[next++], batch, lk);
    if (!s) return s.take_error();
    key_width += *s;
  }
  if (q.shape[3] != key_width) return bad(op, "query width ", q.shape[3], " is not the key width ", key_width);
  if (p.has_mask) {
    const TensorType& m = in[next++];
    const bool ok = rank_is(m, 4) && m.dtype == DType::kF32 && (m.shape[0] == 1 || m.shape[0] == batch) &&
                    (m.shape[1] == 1 || m.shape[1] == hq) && m.shape[2] == lq && m.shape[3] == lk;
    if (!ok) return bad(op, "mask must be f32[1|", batch, ",1|", hq, ",", lq, ",", lk, "], got ", type_str(m));
  }
  if (p.has_len) {
    const TensorType& len = in[next++];
    if (len.dtype != DType::kI32 || len.shape != Shape{batch}) {
      return bad(op, "len must be i32[", batch, "], got ", type_str(len));
    }
  }
  return TensorType{DType::kF32, {batch, hq, lq, kv->dv}};
}

Result<TensorType> infer_rope(const RopeParams& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kRope;
  if (in.size() != 3) return bad(op, "expects x, cos, sin");
  const TensorType &x = in[0], &c = in[1], &s = in[2];
  if (p.token_axis != -2 && p.token_axis != -3) return bad(op, "token axis ", p.token_axis, " must be -2 or -3");
  if (!is_float(x.dtype) || static_cast<int64_t>(x.shape.size()) < -p.token_axis) {
    return bad(op, "x must be a float tensor of rank >= ", -p.token_axis, ", got ", type_str(x));
  }
  const int64_t t = rope_positions(p, x.shape).t_len, d = x.shape.back(), half = p.rotary_dim / 2;
  if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > d) {
    return bad(op, "rotary dim ", p.rotary_dim, " must be even and in 2..", d);
  }
  const Shape want = p.layout == RopeLayout::kHalf ? Shape{t, half} : Shape{t, half, 1};
  if (c != s || c.dtype != x.dtype || c.shape != want) {
    return bad(op, "cos/sin must both be ", dtype_name(x.dtype), shape_str(want), ", got ", type_str(c), " and ",
               type_str(s));
  }
  return x;
}

Result<TensorType> infer_rmsnorm(std::span<const TensorType> in) {
  const OpKind op = OpKind::kRmsNorm;
  if (in.size() != 2) return bad(op, "expects x, weight");
  const TensorType &x = in[0], &w = in[1];
  if (!is_float(x.dtype) || x.shape.empty()) return bad(op, "x must be a float tensor, got ", type_str(x));
  if (w.dtype != x.dtype || w.shape != Shape{x.shape.back()}) {
    return bad(op, "weight must be ", dtype_name(x.dtype), "[", x.shape.back(), "], got ", type_str(w));
  }
  return x;
}

Result<TensorType> infer_glu(std::span<const TensorType> in) {
  const OpKind op = OpKind::kGlu;
  if (in.size() != 2) return bad(op, "expects gate, up");
  if (!is_float(in[0].dtype) || in[0] != in[1]) {
    return bad(op, "gate and up must be float tensors of one type, got ", type_str(in[0]), " and ", type_str(in[1]));
  }
  return in[0];
}

Result<TensorType> infer_linear(const Params& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kLinear;
  if (in.size() != (p.has_bias ? 3u : 2u)) return bad(op, "expects x, weight", p.has_bias ? ", bias" : "");
  const TensorType &x = in[0], &w = in[1];
  if (x.dtype != DType::kF32 || x.shape.empty()) return bad(op, "x must be f32, got ", type_str(x));
  const bool stored = is_float(w.dtype) || is_block_quant(w.dtype);
  if (!stored || !rank_is(w, 2) || w.shape[1] != x.shape.back()) {
    return bad(op, "weight must be [N, ", x.shape.back(), "] of a float or block type, got ", type_str(w));
  }
  if (is_block_quant(w.dtype) && w.shape[1] % block_elems(w.dtype) != 0) {
    return bad(op, "weight rows of ", type_str(w), " are not whole blocks");
  }
  if (p.has_bias && (in[2].dtype != DType::kF32 || in[2].shape != Shape{w.shape[0]})) {
    return bad(op, "bias must be f32[", w.shape[0], "], got ", type_str(in[2]));
  }
  TensorType out = x;
  out.shape.back() = w.shape[0];
  return out;
}

// x [..., D], weights [..., E], E gate and E up weights [F, D], E down weights [D, F].
Result<TensorType> infer_moe(std::span<const TensorType> in) {
  const OpKind op = OpKind::kMoe;
  if (in.size() < 5 || (in.size() - 2) % 3 != 0) return bad(op, "expects x, weights, then E gate, E up and E down weights");
  const size_t e = (in.size() - 2) / 3;
  const TensorType &x = in[0], &w = in[1];
  if (x.dtype != DType::kF32 || x.shape.empty()) return bad(op, "x must be f32, got ", type_str(x));
  Shape routed = x.shape;
  routed.back() = static_cast<int64_t>(e);
  if (w.dtype != DType::kF32 || w.shape != routed) {
    return bad(op, "weights must be f32", shape_str(routed), " for ", e, " experts, got ", type_str(w));
  }
  const int64_t d = x.shape.back(), f = in[2].shape.size() == 2 ? in[2].shape[0] : -1;
  for (size_t i = 2; i < in.size(); ++i) {
    const bool down = i >= 2 + 2 * e;
    const Shape want = down ? Shape{d, f} : Shape{f, d};
    const TensorType& m = in[i];
    const bool stored = is_float(m.dtype) || is_block_quant(m.dtype);
    if (!stored || m.shape != want || (is_block_quant(m.dtype) && want[1] % block_elems(m.dtype) != 0)) {
      return bad(op, down ? "down" : i < 2 + e ? "gate" : "up", " weight ", (i - 2) % e, " must be ", shape_str(want),
                 " of a float or block type in whole blocks, got ", type_str(m));
    }
  }
  return x;
}

// x [..., K], y [..., N] of the same rows, stacks a [E, R * K], b [E, R * N] (f32 or f16), s [E, 1],
// ids i32 [rows].
Result<TensorType> infer_lora(std::span<const TensorType> in) {
  const OpKind op = OpKind::kLora;
  if (in.size() != 6) return bad(op, "expects x, y, a, b, s and ids");
  const TensorType &x = in[0], &y = in[1], &a = in[2], &b = in[3], &s = in[4], &ids = in[5];
  for (const TensorType* t : {&y, &x, &s}) {
    if (t->dtype != DType::kF32 || t->shape.empty()) return bad(op, "y, x and s must be f32, got ", type_str(*t));
  }
  if ((a.dtype != DType::kF32 && a.dtype != DType::kF16) || b.dtype != a.dtype) {
    return bad(op, "the stacks a and b must be both f32 or both f16, got ", type_str(a), " and ", type_str(b));
  }
  const int64_t n = y.shape.back(), k = x.shape.back();
  if (ids.dtype != DType::kI32 || ids.shape.size() != 1 || k == 0 || n == 0 || numel(x.shape) / k != ids.shape[0] ||
      numel(y.shape) / n != ids.shape[0]) {
    return bad(op, "ids must be i32 [rows] for the rows of x ", type_str(x), " and y ", type_str(y), ", got ", type_str(ids));
  }
  const int64_t e = a.shape[0];
  if (a.shape.size() != 2 || a.shape[1] % k != 0 || a.shape[1] == 0 || b.shape != Shape{e, (a.shape[1] / k) * n} ||
      s.shape != Shape{e, 1}) {
    return bad(op, "stacks must be a [E, R * ", k, "], b [E, R * ", n, "] and s [E, 1], got ", type_str(a), ", ", type_str(b), ", ",
               type_str(s));
  }
  return y;
}

// scores f32 [R, n, NB], pos i32 [R * n] -> pred [R, n, NB].
Result<TensorType> infer_block_topk(const Params& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kBlockTopK;
  if (in.size() != 2) return bad(op, "expects scores and pos");
  const TensorType &s = in[0], &pos = in[1];
  if (s.dtype != DType::kF32 || !rank_is(s, 3)) return bad(op, "scores must be f32[R, n, NB], got ", type_str(s));
  if (pos.dtype != DType::kI32 || pos.shape != Shape{s.shape[0] * s.shape[1]}) {
    return bad(op, "pos must be i32[", s.shape[0] * s.shape[1], "], got ", type_str(pos));
  }
  if (p.topk < 1 || p.ratio < 1) return bad(op, "topk ", p.topk, " and ratio ", p.ratio, " must be positive");
  return TensorType{DType::kBool, s.shape};
}

// Attention's operands, then selected pred [B, Lq, NB] and pos i32 [B * Lq], where the NB
// blocks of `ratio` keys cover the Lk keys exactly (the last one may be short).
Result<TensorType> infer_selected_attention(const Params& p, std::span<const TensorType> in) {
  const OpKind op = OpKind::kSelectedAttention;
  if (in.size() < 5) return bad(op, "expects attention's operands, selected and pos");
  Result<TensorType> out = infer_attention(p.attn, in.first(in.size() - 2));
  if (!out) return out.take_error().context(op_name(op));
  const int64_t batch = out->shape[0], lq = out->shape[2];
  const int64_t lk = p.attn.has_read ? in[in.size() - 3].shape[1] : in[1].shape[2];
  const TensorType &sel = in[in.size() - 2], &pos = in.back();
  if (p.ratio < 1 || sel.dtype != DType::kBool || !rank_is(sel, 3) || sel.shape[0] != batch || sel.shape[1] != lq ||
      sel.shape[2] * p.ratio < lk || (sel.shape[2] - 1) * p.ratio >= lk) {
    return bad(op, "selected must be pred[", batch, ", ", lq, ", NB] with NB blocks of ", p.ratio, " covering ", lk,
               " keys, got ", type_str(sel));
  }
  if (pos.dtype != DType::kI32 || pos.shape != Shape{batch * lq}) {
    return bad(op, "pos must be i32[", batch * lq, "], got ", type_str(pos));
  }
  return out;
}

// q f32 [R, H, n, D], k f32|f16 [R, 1, L, D], w f32 [R, H, n, 1] -> f32 [R, n, L].
Result<TensorType> infer_indexer_scores(std::span<const TensorType> in) {
  const OpKind op = OpKind::kIndexerScores;
  if (in.size() != 3) return bad(op, "expects q, k and w");
  const TensorType &q = in[0], &k = in[1], &w = in[2];
  if (q.dtype != DType::kF32 || !rank_is(q, 4)) return bad(op, "q must be f32[R, H, n, D], got ", type_str(q));
  const int64_t r = q.shape[0], h = q.shape[1], n = q.shape[2], d = q.shape[3];
  if ((k.dtype != DType::kF32 && k.dtype != DType::kF16) || !rank_is(k, 4) || k.shape[0] != r || k.shape[1] != 1 ||
      k.shape[3] != d) {
    return bad(op, "k must be f32 or f16 [", r, ", 1, L, ", d, "], got ", type_str(k));
  }
  if (w.dtype != DType::kF32 || w.shape != Shape{r, h, n, 1}) {
    return bad(op, "w must be f32[", r, ", ", h, ", ", n, ", 1], got ", type_str(w));
  }
  return TensorType{DType::kF32, {r, n, k.shape[2]}};
}

}  // namespace

Result<TensorType> infer_fused(OpKind op, const Params& p, std::span<const TensorType> in) {
  switch (op) {
    case OpKind::kAttention: return infer_attention(p.attn, in);
    case OpKind::kRope: return infer_rope(p.rope, in);
    case OpKind::kRmsNorm: return infer_rmsnorm(in);
    case OpKind::kSoftmax:
      if (in.size() != 1 || !is_float(in[0].dtype) || in[0].shape.empty()) return bad(op, "expects one float tensor");
      return in[0];
    case OpKind::kGlu: return infer_glu(in);
    case OpKind::kLinear: return infer_linear(p, in);
    case OpKind::kMoe: return infer_moe(in);
    case OpKind::kLora: return infer_lora(in);
    case OpKind::kBlockTopK: return infer_block_topk(p, in);
    case OpKind::kSelectedAttention: return infer_selected_attention(p, in);
    case OpKind::kIndexerScores: return infer_indexer_scores(in);
    default: break;
  }
  return internal_error("infer_fused: ", op_name(op), " is not a fused op");
}

}  // namespace kvf::ir
