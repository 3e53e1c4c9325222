// The primitive opcodes of the graph IR (DESIGN.md §2) and their parameters.
// What an op computes lives in docs/ir.md and eval/; its typing rule lives in ir/infer.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace kvf::ir {

enum class OpKind : uint8_t {
  // unary, elementwise, float
  kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kErf, kAbs, kSin, kCos, kRecip,
  // binary, elementwise with numpy broadcasting
  kAdd, kSub, kMul, kDiv, kMax, kMin,
  kCompare,  // -> pred; params.cmp
  kAnd, kOr,  // pred x pred -> pred
  kSelect,    // select(pred, on_true, on_false), all three broadcast
  // reductions over params.axes, params.keepdim
  kReduceSum, kReduceMax,
  // layout
  kReshape,    // params.shape
  kTranspose,  // params.perm
  kBroadcast,  // params.shape (numpy rules: leading axes added, size-1 axes stretched)
  kSlice,      // params.starts/limits/steps, static
  kConcat,     // params.axis
  kIota,       // params.shape, params.axis, params.dtype; no operands
  kCast,       // params.dtype
  // indexing
  kGather,              // table [N, ...], idx i32 [...I] -> [...I, ...]; rows along axis 0
  kScatterUpdate,       // base [N, ...], idx i32 [M], upd [M, ...]; idx -1 writes nothing
  kDynamicUpdateSlice,  // base, update, start i32 [1]: update placed at start along params.axis
  kMatMul,              // [..., M, K] x [..., K, N] -> [..., M, N], batch axes broadcast
  // collective
  kAllReduce,  // x f32 [...] -> the elementwise sum of x over the ranks of the group that runs
               // the graph, in rank order. A side effect on the group: every rank must run the
               // same all_reduce eqns in the same order, so passes never merge, drop or reorder one

  // Fused ops: formed by compile/ from the chains ops:: emits, never by tracers. Each has
  // the meaning of the chain it replaces (docs/ir.md, docs/attention.md).
  kAttention,  // q, k, v [, k_shared] [, mask] [, len] [, read]: params.attn
  kRope,       // x [..., T, D] (or [..., T, H, D]), cos, sin [T, rot/2] (or [T, rot/2, 1]): params.rope
  kRmsNorm,    // x [..., D], weight [D]: x * rsqrt(mean(x²) + eps) * (weight or 1 + weight)
  kSoftmax,    // x: over the last axis, max-subtracted
  kGlu,        // gate, up (same shape): act(gate) * up; params.glu
  kLinear,     // x f32 [..., K], weight [N, K] in its stored dtype [, bias [N]] -> f32 [..., N]
  kMoe,        // x f32 [..., D], weights f32 [..., E], then E gate, E up [F, D] and E down [D, F]
               // stored weights -> f32 [..., D]: sum over e of weights[..., e] times expert e's
               // gated unit down_e(act(gate_e x) * up_e x), in e order, skipping the experts whose
               // weight is 0 (a 0 weight adds an exact 0 in the chain); params.glu
  kLora,       // x f32 [..., K], y f32 [..., N], a [E, R * K], b [E, R * N] (f32 or f16), s f32 [E, 1],
               // ids i32 [T] (T rows of x and y) -> y + s[id] * (a[id] x)ᵀ b[id] per row, a[id]
               // [R, K] and b[id] [R, N] (B transposed); id 0 is the base model's all-zero entry
  kBlockTopK,  // scores f32 [R, n, NB], pos i32 [R * n] -> pred [R, n, NB]: ops::block_topk with
               // params.topk and params.ratio (each query's topk best complete blocks)
  kSelectedAttention,  // Attention's operands, then selected pred [B, Lq, NB] and pos i32 [B * Lq]:
                       // the attention with mask + ops::selected_mask(selected, pos, Lk, params.ratio)
  kIndexerScores,  // q f32 [R, H, n, D], k [R, 1, L, D] (f32 or f16), w f32 [R, H, n, 1] -> f32 [R, n, L]:
                   // ops::indexer_scores with params.scale
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kIndexerScores) + 1;

enum class CmpDir : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

std::string_view op_name(OpKind op);
bool is_fused(OpKind op);
std::string_view cmp_name(CmpDir dir);

bool is_unary(OpKind op);
bool is_binary(OpKind op);  // includes compare/and/or, excludes select
bool is_reduce(OpKind op);
// An op whose value depends on the other ranks of a group (all_reduce): passes keep every one,
// in order, and never merge two.
bool is_collective(OpKind op);

// The fused Attention's parameters. Operands in order: q, k, v, then k_shared if
// has_shared, mask if has_mask, len if has_len, read if has_read (always last).
// Dense form: k [B, Hkv, Lk, Dk], v [B, Hkv, Lk, Dv]. Paged-key form (has_read): k and v
// are the pools themselves, k [S, Hkv, Dk] and v [S, Hkv, Dv], and read i32 [B, Lk] names
// the pool row of every key: key t of row b, head g is k[read[b, t], g, :] (and the same row
// of v). Every word of read must be in [0, S); the rewrite forms this only from a read-map
// slot declared over S rows, which every binder checks (ir::check_slot).
struct AttnParams {
  double scale = 1.0;
  double softcap = 0.0;  // 0: none; else cap * tanh(score / cap), before the mask
  int64_t n_rep = 1;     // query heads per key head (GQA/MQA)
  bool has_shared = false;  // split key (MLA): k_shared [B, 1, Lk, s] completes every head's key
  bool has_mask = false;    // additive mask [1|B, 1|Hq, Lq, Lk]
  bool has_len = false;     // live length len i32 [B]: keys t >= len[b] are not visited
  bool has_read = false;    // paged keys: k, v are pools [S, Hkv, D] read through read i32 [B, Lk]
  bool operator==(const AttnParams&) const = default;
};

enum class RopeLayout : uint8_t { kHalf, kInterleaved };  // as ops::RopeLayout
struct RopeParams {
  RopeLayout layout = RopeLayout::kHalf;
  int64_t rotary_dim = 0;  // the rotated prefix of the last axis; the rest passes through
  // x's axis that the tables' rows index: -2 ([..., T, D]), or -3 ([..., T, H, D]: the heads
  // of a token next to each other, as a linear's output is split into them).
  int64_t token_axis = -2;
  bool operator==(const RopeParams&) const = default;
};

// The tables' row of x's row r (x seen as rows of its last axis): (r / every) % t_len.
struct RopePositions {
  int64_t t_len = 1, every = 1;
};
inline RopePositions rope_positions(const RopeParams& p, const std::vector<int64_t>& x_shape) {
  const auto rank = static_cast<int64_t>(x_shape.size());
  const auto at = [&](int64_t axis) { return x_shape[static_cast<size_t>(rank + axis)]; };
  return p.token_axis == -3 ? RopePositions{at(-3), at(-2)} : RopePositions{at(-2), 1};
}

enum class GluAct : uint8_t { kSilu, kGeluTanh, kGeluErf };

// Static parameters; each op reads only the fields docs/ir.md lists for it.
struct Params {
  std::vector<int64_t> axes;    // reduce axes; transpose permutation
  std::vector<int64_t> shape;   // reshape / broadcast / iota result shape
  std::vector<int64_t> starts;  // slice
  std::vector<int64_t> limits;  // slice
  std::vector<int64_t> steps;   // slice
  int64_t axis = 0;             // concat, iota, dynamic_update_slice
  bool keepdim = false;         // reduce
  CmpDir cmp = CmpDir::kEq;     // compare
  DType dtype = DType::kF32;    // cast, iota
  // fused ops
  AttnParams attn;              // attention
  RopeParams rope;              // rope
  double eps = 0.0;             // rmsnorm
  bool unit_offset = false;     // rmsnorm: scale by (1 + weight), as Gemma
  GluAct glu = GluAct::kSilu;   // glu
  bool has_bias = false;        // linear
  int64_t topk = 0;             // block_topk: blocks each query keeps
  int64_t ratio = 1;            // block_topk, selected_attention: key positions per block
  double scale = 0.0;           // indexer_scores: of every dot product, before the relu
};

}  // namespace kvf::ir
