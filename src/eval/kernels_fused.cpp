// Reference loops for the fused ops compile/ forms. They define what a fused op means, in
// f64, so a pass can be checked against the chain it replaced and every exec/ kernel against
// the oracle. Rope rounds its products like the chain it replaces (the rope pass is exact);
// the others round once at the end (their passes reassociate).
#include <algorithm>
#include <cmath>
#include <limits>

#include "eval/kernels.h"

namespace kvf::eval {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rounds like one primitive of the replaced chain would under Precision::kNative.
double step(const KernelArgs& a, double x) { return a.native ? round_to_dtype(a.out_type.dtype, x) : x; }

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2)); }

struct AttnView {
  const Buffer *q, *k, *v, *shared = nullptr, *mask = nullptr, *len = nullptr, *read = nullptr;
};

AttnView attention_operands(const KernelArgs& a) {
  const ir::AttnParams& p = a.eqn.params.attn;
  AttnView view{a.in[0], a.in[1], a.in[2]};
  size_t next = 3;
  if (p.has_shared) view.shared = a.in[next++];
  if (p.has_mask) view.mask = a.in[next++];
  if (p.has_len) view.len = a.in[next++];
  if (p.has_read) view.read = a.in[next++];
  return view;
}

// Where key t of batch row b, key head g starts in k (or v): the dense layout
// [B, Hkv, Lk, D], or the paged pools [S, Hkv, D] through the read map [B, Lk].
struct KeyRows {
  const AttnView& in;
  int64_t hkv, lk;
  int64_t row(int64_t b, int64_t g, int64_t t) const {
    if (!in.read) return (b * hkv + g) * lk + t;
    return static_cast<int64_t>(in.read->data[static_cast<size_t>(b * lk + t)]) * hkv + g;
  }
  // The split key's shared part has one head: [B, 1, Lk, s], or the pool [S, 1, s].
  int64_t shared_row(int64_t b, int64_t t) const {
    if (!in.read) return b * lk + t;
    return static_cast<int64_t>(in.read->data[static_cast<size_t>(b * lk + t)]);
  }
};

// Every word of the read map names a pool row. The binders check the map slot the rewrite
// reads (ir::check_slot) before a step runs, so this refuses only a hand-built eqn.
Status check_read(const Buffer& read, int64_t pool_rows) {
  for (size_t i = 0; i < read.data.size(); ++i) {
    const double w = read.data[i];
    if (!(w >= 0 && w < static_cast<double>(pool_rows))) {
      return invalid_input("attention: read map word ", i, " names pool row ", w, ", outside the pool of ", pool_rows,
                           " rows");
    }
  }
  return {};
}


// selected_attention's selection: key t is visible to query row i of batch row b iff
// t <= pos[b Lq + i] and t's block of `ratio` keys is selected or is unfinished at pos.
struct Selection {
  const Buffer *selected, *pos;
  int64_t ratio;
  bool visible(int64_t b, int64_t i, int64_t lq, int64_t t) const {
    const double p = pos->data[static_cast<size_t>(b * lq + i)];
    const int64_t blocks = selected->shape[2], blk = t / ratio;
    if (static_cast<double>(t) > p) return false;
    return selected->data[static_cast<size_t>((b * lq + i) * blocks + blk)] != 0 ||
           static_cast<double>(blk * ratio + ratio - 1) > p;
  }
};

Result<Buffer> attend(const KernelArgs& a, const AttnView& in, const Selection* sel) {
  const ir::AttnParams& p = a.eqn.params.attn;
  const bool paged = in.read != nullptr;
  if (paged) {
    Status ok = check_read(*in.read, in.k->shape[0]);
    if (!ok) return ok.take_error();
  }
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  const Shape& qs = in.q->shape;
  const int64_t batch = qs[0], hq = qs[1], lq = qs[2], dq = qs[3];
  const int64_t hkv = in.k->shape[1];
  const int64_t lk = paged ? in.read->shape[1] : in.k->shape[2];
  const int64_t dk = in.k->shape.back(), dv = in.v->shape.back();
  const int64_t ds = in.shared ? in.shared->shape.back() : 0;
  const Shape ms = in.mask ? in.mask->shape : Shape{1, 1, lq, lk};
  const KeyRows rows{in, hkv, lk};
  std::vector<double> scores(static_cast<size_t>(lk));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t live = in.len ? std::clamp<int64_t>(static_cast<int64_t>(in.len->data[b]), 0, lk) : lk;
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / p.n_rep;
      for (int64_t i = 0; i < lq; ++i) {
        const double* qrow = in.q->data.data() + ((b * hq + h) * lq + i) * dq;
        double m = -kInf;
        bool seen = false;  // a score other than -inf (NaN included, which the sum spreads)
        for (int64_t t = 0; t < live; ++t) {
          const double* krow = in.k->data.data() + rows.row(b, g, t) * dk;
          double dot = 0;
          for (int64_t c = 0; c < dk; ++c) dot += qrow[c] * krow[c];
          if (in.shared) {
            const double* srow = in.shared->data.data() + rows.shared_row(b, t) * ds;
            for (int64_t c = 0; c < ds; ++c) dot += qrow[dk + c] * srow[c];
          }
          double s = dot * p.scale;
          if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
          double added = 0;  // the mask, plus the selection's 0 or -inf as the chain adds them
          if (in.mask) {
            const int64_t mb = ms[0] == 1 ? 0 : b, mh = ms[1] == 1 ? 0 : h;
            added = in.mask->data[static_cast<size_t>(((mb * ms[1] + mh) * lq + i) * lk + t)];
          }
          if (sel) added += sel->visible(b, i, lq, t) ? 0.0 : -kInf;
          if (in.mask || sel) s += added;
          scores[static_cast<size_t>(t)] = s;
          m = std::max(m, s);
          seen = seen || s != -kInf;
        }
        if (!seen) continue;  // no visible key: zeros, as ops::masked_softmax
        double sum = 0;
        for (int64_t t = 0; t < live; ++t) {
          double& e = scores[static_cast<size_t>(t)];
          e = std::exp(e - m);
          sum += e;
        }
        double* orow = out->data.data() + ((b * hq + h) * lq + i) * dv;
        for (int64_t t = 0; t < live; ++t) {
          const double w = scores[static_cast<size_t>(t)] / sum;
          const double* vrow = in.v->data.data() + rows.row(b, g, t) * dv;
          for (int64_t c = 0; c < dv; ++c) orow[c] += w * vrow[c];
        }
      }
    }
  }
  return out;
}

}  // namespace

Result<Buffer> eval_attention(const KernelArgs& a) { return attend(a, attention_operands(a), nullptr); }

Result<Buffer> eval_selected_attention(const KernelArgs& a) {
  const Selection sel{a.in[a.in.size() - 2], a.in.back(), a.eqn.params.ratio};
  return attend(a, attention_operands(a), &sel);
}

Result<Buffer> eval_indexer_scores(const KernelArgs& a) {
  const Buffer &q = *a.in[0], &k = *a.in[1], &w = *a.in[2];
  const int64_t r = q.shape[0], h = q.shape[1], n = q.shape[2], d = q.shape[3], lk = k.shape[2];
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  for (int64_t b = 0; b < r; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < lk; ++t) {
        const double* kr = k.data.data() + (b * lk + t) * d;
        double sum = 0;
        for (int64_t j = 0; j < h; ++j) {
          const double* qr = q.data.data() + ((b * h + j) * n + i) * d;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qr[c] * kr[c];
          sum += w.data[static_cast<size_t>((b * h + j) * n + i)] * std::max(0.0, dot * a.eqn.params.scale);
        }
        out->data[static_cast<size_t>((b * n + i) * lk + t)] = sum;
      }
    }
  }
  return out;
}

// Each row's place among its candidates (complete blocks), as ops::rank_below counts it:
// the candidates scoring above it, or the same with a lower index; a NaN score compares with
// nothing, so it is never ahead of another and nothing is ahead of it.
Result<Buffer> eval_block_topk(const KernelArgs& a) {
  const Buffer &scores = *a.in[0], &pos = *a.in[1];
  const int64_t rows = scores.shape[0] * scores.shape[1], blocks = scores.shape[2];
  const int64_t k = a.eqn.params.topk, ratio = a.eqn.params.ratio;
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  std::vector<int64_t> order;
  for (int64_t r = 0; r < rows; ++r) {
    const double* s = scores.data.data() + r * blocks;
    double* o = out->data.data() + r * blocks;
    order.clear();
    for (int64_t j = 0; j < blocks; ++j) {
      if (static_cast<double>(j * ratio + ratio - 1) > pos.data[static_cast<size_t>(r)]) continue;  // unfinished
      if (std::isnan(s[j])) o[j] = 1;
      else order.push_back(j);
    }
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
    for (size_t i = 0; i < order.size() && static_cast<int64_t>(i) < k; ++i) o[order[i]] = 1;
  }
  return out;
}

Result<Buffer> eval_rope(const KernelArgs& a) {
  const Buffer& x = *a.in[0];
  const Buffer &cos = *a.in[1], &sin = *a.in[2];
  const ir::RopeParams& p = a.eqn.params.rope;
  Buffer out = x;
  const int64_t d = x.shape.back(), half = p.rotary_dim / 2;
  const ir::RopePositions at = ir::rope_positions(p, x.shape);
  const int64_t rows = x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * d;
    double* o = out.data.data() + r * d;
    const double* c = cos.data.data() + (r / at.every % at.t_len) * half;
    const double* s = sin.data.data() + (r / at.every % at.t_len) * half;
    for (int64_t i = 0; i < half; ++i) {
      const bool pairs = p.layout == ir::RopeLayout::kInterleaved;
      const int64_t i0 = pairs ? 2 * i : i, i1 = pairs ? 2 * i + 1 : i + half;
      o[i0] = step(a, step(a, xr[i0] * c[i]) - step(a, xr[i1] * s[i]));
      // Term order as the chain: x2·cos + x1·sin (half), even·sin + odd·cos (pairs).
      o[i1] = pairs ? step(a, step(a, xr[i0] * s[i]) + step(a, xr[i1] * c[i]))
                    : step(a, step(a, xr[i1] * c[i]) + step(a, xr[i0] * s[i]));
    }
  }
  return out;
}

Result<Buffer> eval_rmsnorm(const KernelArgs& a) {
  const Buffer &x = *a.in[0], &w = *a.in[1];
  const ir::Params& p = a.eqn.params;
  Buffer out = x;
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * d;
    double ss = 0;
    for (int64_t c = 0; c < d; ++c) ss += xr[c] * xr[c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + p.eps);
    for (int64_t c = 0; c < d; ++c) {
      out.data[static_cast<size_t>(r * d + c)] = xr[c] * inv * (p.unit_offset ? 1.0 + w.data[c] : w.data[c]);
    }
  }
  return out;
}

Result<Buffer> eval_softmax(const KernelArgs& a) {
  Buffer out = *a.in[0];
  const int64_t d = out.shape.back(), rows = out.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    double* row = out.data.data() + r * d;
    double m = -kInf, sum = 0;
    for (int64_t c = 0; c < d; ++c) m = std::max(m, row[c]);
    for (int64_t c = 0; c < d; ++c) sum += row[c] = std::exp(row[c] - m);
    for (int64_t c = 0; c < d; ++c) row[c] /= sum;
  }
  return out;
}

Result<Buffer> eval_glu(const KernelArgs& a) {
  const Buffer &gate = *a.in[0], &up = *a.in[1];
  Buffer out = gate;
  const ir::GluAct act = a.eqn.params.glu;
  for (size_t i = 0; i < out.data.size(); ++i) {
    const double g = gate.data[i];
    const double f = act == ir::GluAct::kSilu ? silu(g) : act == ir::GluAct::kGeluTanh ? gelu_tanh(g) : gelu_erf(g);
    out.data[i] = f * up.data[i];
  }
  return out;
}

Result<Buffer> eval_linear(const KernelArgs& a) {
  const Buffer &x = *a.in[0], &w = *a.in[1];
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  const int64_t k = x.shape.back(), n = w.shape[0], rows = x.numel() / k;
  const Buffer* bias = a.eqn.params.has_bias ? a.in[2] : nullptr;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) acc += x.data[static_cast<size_t>(r * k + c)] * w.data[static_cast<size_t>(j * k + c)];
        out->data[static_cast<size_t>(r * n + j)] = acc + (bias ? bias->data[static_cast<size_t>(j)] : 0.0);
      }
    }
  };
  if (a.pool) a.pool->parallel_for(rows, body, 1);
  else body(0, rows);
  return out;
}

// Each picked expert's unit as the Linear, Glu, Mul and Add eqns of its chain compute it,
// rounding where they round under kNative; a row's experts of weight 0 are skipped, the
// exact 0 they add in the chain.
Result<Buffer> eval_moe(const KernelArgs& a) {
  const Buffer &x = *a.in[0], &wt = *a.in[1];
  const int64_t d = x.shape.back(), rows = x.numel() / d, e = static_cast<int64_t>(a.in.size() - 2) / 3;
  const int64_t f = a.in[2]->shape[0];
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  const ir::GluAct act = a.eqn.params.glu;
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<double> h(static_cast<size_t>(f));
    for (int64_t r = begin; r < end; ++r) {
      const double* xr = x.data.data() + r * d;
      double* o = out->data.data() + r * d;
      bool first = true;
      for (int64_t ex = 0; ex < e; ++ex) {
        const double w = wt.data[static_cast<size_t>(r * e + ex)];
        if (w == 0) continue;
        const Buffer &gate = *a.in[static_cast<size_t>(2 + ex)], &up = *a.in[static_cast<size_t>(2 + e + ex)];
        const Buffer& down = *a.in[static_cast<size_t>(2 + 2 * e + ex)];
        for (int64_t j = 0; j < f; ++j) {
          double g = 0, u = 0;
          for (int64_t c = 0; c < d; ++c) {
            g += xr[c] * gate.data[static_cast<size_t>(j * d + c)];
            u += xr[c] * up.data[static_cast<size_t>(j * d + c)];
          }
          g = step(a, g), u = step(a, u);
          const double s = act == ir::GluAct::kSilu ? silu(g) : act == ir::GluAct::kGeluTanh ? gelu_tanh(g) : gelu_erf(g);
          h[static_cast<size_t>(j)] = step(a, s * u);
        }
        for (int64_t c = 0; c < d; ++c) {
          double y = 0;
          for (int64_t j = 0; j < f; ++j) y += h[static_cast<size_t>(j)] * down.data[static_cast<size_t>(c * f + j)];
          const double term = step(a, step(a, y) * w);
          o[c] = first ? term : step(a, o[c] + term);
        }
        first = false;
      }
    }
  };
  if (a.pool) a.pool->parallel_for(rows, body, 1);
  else body(0, rows);
  return out;
}

// Each row's LoRA term as the chain computes it: a[id] x, then (a[id] x)ᵀ b[id], each sum
// rounded where the chain's MatMul rounds; times s[id]; added to y. An id outside the stacks
// is the chain's gather failing.
Result<Buffer> eval_lora(const KernelArgs& a) {
  const Buffer &x = *a.in[0], &y = *a.in[1], &fa = *a.in[2], &fb = *a.in[3], &fs = *a.in[4], &ids = *a.in[5];
  const int64_t n = y.shape.back(), k = x.shape.back(), rows = ids.numel(), e = fa.shape[0], r = fa.shape[1] / k;
  for (int64_t t = 0; t < rows; ++t) {
    const double id = ids.data[static_cast<size_t>(t)];
    if (id < 0 || id >= static_cast<double>(e)) return invalid_input("lora: row ", t, " names adapter ", id, " of ", e);
  }
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<double> ax(static_cast<size_t>(r));
    for (int64_t t = begin; t < end; ++t) {
      const auto id = static_cast<int64_t>(ids.data[static_cast<size_t>(t)]);
      const double* xr = x.data.data() + t * k;
      const double* ar = fa.data.data() + id * r * k;
      const double* br = fb.data.data() + id * r * n;  // [r, n]
      for (int64_t j = 0; j < r; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) acc += ar[j * k + c] * xr[c];
        ax[static_cast<size_t>(j)] = step(a, acc);
      }
      const double s = fs.data[static_cast<size_t>(id)];
      for (int64_t o = 0; o < n; ++o) {
        double acc = 0;
        for (int64_t j = 0; j < r; ++j) acc += ax[static_cast<size_t>(j)] * br[j * n + o];
        out->data[static_cast<size_t>(t * n + o)] = step(a, y.data[static_cast<size_t>(t * n + o)] + step(a, step(a, acc) * s));
      }
    }
  };
  if (a.pool) a.pool->parallel_for(rows, body, 1);
  else body(0, rows);
  return out;
}

}  // namespace kvf::eval
