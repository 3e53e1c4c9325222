// selection: selected attention, as ops:: traces it, becomes three eqns.
//   mask = rest + selected_mask(selected, pos, Lk, ratio)   feeding an Attention eqn
//   selected = block_topk(scores, pos, k, ratio)
//   scores = indexer_scores(q, k, w, scale)                  (DeepSeek-V3.2's indexer)
// The Attention becomes a SelectedAttention over rest, selected and pos (a kernel visits the
// selected blocks' keys alone), the selection a BlockTopK over scores and pos (a kernel
// ranks each query's blocks once, where the chain compares every pair), and the scores an
// IndexerScores (a kernel sums each key's heads in registers, where the chain writes every
// head's score out). The first two are exact on the oracle; the scores' sums reassociate. Each chain is proved
// by unification with the composition itself (compile/template_match.h), traced at the sizes
// read off the graph; the chains' eqns are left to dce. A mask or a selection that is not
// the composition keeps its eqns, and so does a SelectedAttention no CPU kernel reads: dense
// keys with more than one key head (the kernel reads selected keys as pool rows).
#include <cmath>
#include <set>

#include "compile/match.h"
#include "compile/passes.h"
#include "compile/template_match.h"
#include "ir/ops.h"

namespace kvf::compile {
namespace {

using ir::Eqn;
using ir::OpKind;
using ir::ValueId;

struct SelectedMask {
  ValueId rest = -1;  // what the mask adds besides the selection; -1: nothing
  ValueId selected = -1, pos = -1;
  int64_t ratio = 0;
};

// The block counts of pred [R, n, NB] values within `depth` eqns below v.
std::set<int64_t> block_counts(const ir::Graph& g, ValueId v, int64_t r, int64_t n, int depth) {
  std::set<int64_t> out;
  std::vector<std::pair<ValueId, int>> todo{{v, 0}};
  std::set<ValueId> seen;
  while (!todo.empty()) {
    auto [x, d] = todo.back();
    todo.pop_back();
    if (!seen.insert(x).second) continue;
    const ir::TensorType& t = g.type(x);
    if (t.dtype == DType::kBool && t.shape.size() == 3 && t.shape[0] == r && t.shape[1] == n) out.insert(t.shape[2]);
    const Eqn* e = producer(g, x);
    if (e == nullptr || d == depth) continue;
    for (ValueId in : e->in) todo.push_back({in, d + 1});
  }
  return out;
}

// v [R, 1, n, Lk] as ops::selected_mask(selected, pos, Lk, ratio) for some NB and ratio.
std::optional<SelectedMask> selected_mask_at(const ir::Graph& g, ValueId v) {
  const ir::TensorType& t = g.type(v);
  if (t.dtype != DType::kF32 || t.shape.size() != 4 || t.shape[1] != 1) return std::nullopt;
  const int64_t r = t.shape[0], n = t.shape[2], lk = t.shape[3];
  constexpr int kChainDepth = 12;  // selected_mask's eqns between its root and the selection
  for (int64_t blocks : block_counts(g, v, r, n, kChainDepth)) {
    // The ratios whose `blocks` blocks cover Lk keys: (NB - 1) ratio < Lk <= NB ratio.
    const int64_t lo = (lk + blocks - 1) / blocks, hi = blocks > 1 ? (lk - 1) / (blocks - 1) : lk;
    for (int64_t ratio = lo; ratio <= std::min(hi, lo + 64); ++ratio) {
      Result<Template> tmpl = make_template(
          {{DType::kBool, {r, n, blocks}}, {DType::kI32, {r * n}}},
          [&](ir::Builder&, std::span<const ir::V> in) { return ir::ops::selected_mask(in[0], in[1], lk, ratio); });
      if (!tmpl) continue;
      std::optional<std::vector<ValueId>> bound = unify(*tmpl, g, v);
      if (bound && (*bound)[0] >= 0 && (*bound)[1] >= 0) return SelectedMask{-1, (*bound)[0], (*bound)[1], ratio};
    }
  }
  return std::nullopt;
}

// The attention's mask as rest + selected_mask (either order), or the selected mask alone.
std::optional<SelectedMask> split_mask(const ir::Graph& g, ValueId mask) {
  if (std::optional<SelectedMask> alone = selected_mask_at(g, mask)) return alone;
  const Eqn* add = def(g, mask, OpKind::kAdd);
  if (add == nullptr) return std::nullopt;
  std::optional<SelectedMask> found;
  either_order(*add, [&](ValueId rest, ValueId sel) {
    if (g.type(rest) != g.type(mask)) return false;  // rest must be a whole mask of its own
    found = selected_mask_at(g, sel);
    if (found) found->rest = rest;
    return found.has_value();
  });
  return found;
}

// A BlockTopK for `selected` when it is ops::block_topk(scores, pos, k, ratio): k is the
// literal its rank is compared with.
std::optional<Match> block_topk_at(const ir::Graph& g, ValueId selected, int64_t ratio) {
  const Eqn* root = def(g, selected, OpKind::kAnd);
  if (root == nullptr) return std::nullopt;
  std::optional<int64_t> k;
  for (ValueId in : root->in) {
    const Eqn* c = def(g, in, OpKind::kCompare);
    if (c == nullptr || c->params.cmp != ir::CmpDir::kLt || g.value(c->in[1]).kind != ir::ValueKind::kLiteral) continue;
    const double lit = g.value(c->in[1]).literal;
    if (lit >= 1 && lit == std::floor(lit) && lit < 1e15) k = static_cast<int64_t>(lit);
  }
  if (!k) return std::nullopt;
  const Shape& s = g.type(selected).shape;  // [R, n, NB]
  Result<Template> tmpl = make_template({{DType::kF32, s}, {DType::kI32, {s[0] * s[1]}}},
                                        [&](ir::Builder&, std::span<const ir::V> in) {
                                          return ir::ops::block_topk(in[0], in[1], *k, ratio);
                                        });
  if (!tmpl) return std::nullopt;
  std::optional<std::vector<ValueId>> bound = unify(*tmpl, g, selected);
  if (!bound || (*bound)[0] < 0 || (*bound)[1] < 0) return std::nullopt;
  Match m;
  m.root = static_cast<size_t>(g.value(selected).producer);
  m.body = {};  // the chain's other eqns are left to dce: some are shared
  m.op = OpKind::kBlockTopK;
  m.operands = *bound;
  m.params.topk = *k;
  m.params.ratio = ratio;
  return m;
}

// An IndexerScores for `scores` when it is ops::indexer_scores(q, k, w, scale): the sizes
// and the scale read off its head sum, its relu and its product.
std::optional<Match> indexer_scores_at(const ir::Graph& g, ValueId scores) {
  const Eqn* sum = def(g, scores, OpKind::kReduceSum);
  const Eqn* mul = sum ? def(g, sum->in[0], OpKind::kMul) : nullptr;
  if (mul == nullptr) return std::nullopt;
  ValueId w = -1, per_head = -1;
  either_order(*mul, [&](ValueId heads, ValueId weights) {
    const Eqn* b = def(g, weights, OpKind::kBroadcast);
    if (b == nullptr) return false;
    w = b->in[0];
    per_head = heads;
    return true;
  });
  const Eqn* relu = per_head >= 0 ? def(g, per_head, OpKind::kMax) : nullptr;
  const Eqn* scaled = relu ? def(g, relu->in[0], OpKind::kMul) : nullptr;
  if (scaled == nullptr || g.value(scaled->in[1]).kind != ir::ValueKind::kLiteral) return std::nullopt;
  const Eqn* dots = def(g, reshape_source(g, scaled->in[0]), OpKind::kMatMul);
  const Shape &s = g.type(scores).shape, &ws = g.type(w).shape;  // [R, n, L], [R, H, n, 1]
  if (dots == nullptr || s.size() != 3 || ws.size() != 4) return std::nullopt;
  const int64_t d = g.type(dots->in[0]).shape.back();
  const double scale = g.value(scaled->in[1]).literal;
  Result<Template> tmpl = make_template(
      {{DType::kF32, {s[0], ws[1], s[1], d}}, {DType::kF32, {s[0], 1, s[2], d}}, {DType::kF32, ws}},
      [&](ir::Builder&, std::span<const ir::V> in) { return ir::ops::indexer_scores(in[0], in[1], in[2], scale); });
  if (!tmpl) return std::nullopt;
  std::optional<std::vector<ValueId>> bound = unify(*tmpl, g, scores);
  if (!bound || (*bound)[0] < 0 || (*bound)[1] < 0 || (*bound)[2] < 0) return std::nullopt;
  Match m;
  m.root = static_cast<size_t>(g.value(scores).producer);
  m.op = OpKind::kIndexerScores;
  m.operands = *bound;
  // Keys widened from an f16 cache are read as stored (widening is exact).
  const Eqn* widen = def(g, m.operands[1], OpKind::kCast);
  if (widen != nullptr && g.type(widen->in[0]).dtype == DType::kF16) m.operands[1] = widen->in[0];
  m.params.scale = scale;
  return m;
}

// The ratio of a block top-k's candidates, compare(le, block_last_positions, pos): the last
// positions are iota (ratio 1) or iota · ratio + (ratio - 1). Unification checks the rest.
std::optional<int64_t> candidate_ratio(const ir::Graph& g, const Eqn& root) {
  for (ValueId in : root.in) {
    const Eqn* c = def(g, reshape_source(g, in), OpKind::kCompare);
    if (c == nullptr || c->params.cmp != ir::CmpDir::kLe) continue;
    const Eqn* b = def(g, c->in[0], OpKind::kBroadcast);
    const ValueId last = b ? b->in[0] : c->in[0];
    if (def(g, last, OpKind::kIota)) return 1;
    const Eqn* add = def(g, last, OpKind::kAdd);
    const Eqn* mul = add ? def(g, add->in[0], OpKind::kMul) : nullptr;
    if (mul == nullptr || g.value(mul->in[1]).kind != ir::ValueKind::kLiteral) continue;
    const double ratio = g.value(mul->in[1]).literal;
    if (ratio >= 1 && ratio == std::floor(ratio) && ratio < 1e9) return static_cast<int64_t>(ratio);
  }
  return std::nullopt;
}

// The SelectedAttention replacing attention eqn i, whose mask is `split`.
Match selected_attention(const ir::Graph& g, size_t i, const SelectedMask& split) {
  const Eqn& e = g.eqns[i];
  Match m;
  m.root = i;
  m.body = {};
  m.op = OpKind::kSelectedAttention;
  m.params = e.params;
  m.params.ratio = split.ratio;
  const size_t mask_at = 3 + (e.params.attn.has_shared ? 1 : 0);
  for (size_t j = 0; j < e.in.size(); ++j) {
    if (j != mask_at) m.operands.push_back(e.in[j]);
    else if (split.rest >= 0) m.operands.push_back(split.rest);
  }
  m.params.attn.has_mask = split.rest >= 0;
  m.operands.push_back(split.selected);
  m.operands.push_back(split.pos);
  return m;
}

Result<ir::Graph> selection(const ir::Graph& g) {
  std::vector<Match> found;
  std::set<ValueId> selections;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const Eqn& e = g.eqns[i];
    if (e.op != OpKind::kAttention || !e.params.attn.has_mask) continue;
    const bool pool_rows = e.params.attn.has_read || g.type(e.in[1]).shape[1] == 1;  // what the kernel reads
    if (!pool_rows) continue;
    std::optional<SelectedMask> split = split_mask(g, e.in[3 + (e.params.attn.has_shared ? 1 : 0)]);
    if (!split) continue;
    found.push_back(selected_attention(g, i, *split));
    if (!selections.insert(split->selected).second) continue;
    if (std::optional<Match> topk = block_topk_at(g, split->selected, split->ratio)) found.push_back(*topk);
  }
  for (const Eqn& e : g.eqns) {  // selections no selected attention reads
    if (e.op != OpKind::kAnd || selections.count(e.out) || g.type(e.out).shape.size() != 3) continue;
    const std::optional<int64_t> ratio = candidate_ratio(g, e);
    if (!ratio) continue;
    if (std::optional<Match> topk = block_topk_at(g, e.out, *ratio)) found.push_back(*topk);
  }
  for (const Eqn& e : g.eqns) {  // the indexer's scores, wherever they go
    if (e.op != OpKind::kReduceSum || e.params.axes != std::vector<int64_t>{1}) continue;
    if (std::optional<Match> scores = indexer_scores_at(g, e.out)) found.push_back(*scores);
  }
  return apply_matches(g, std::move(found));
}

}  // namespace

Pass selection_pass() { return {"selection", Exactness::kReassociating, selection}; }

}  // namespace kvf::compile
