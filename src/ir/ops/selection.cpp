// Ranking and block selection in primitives (ops.h): pairwise compares, so the oracle defines
// what a selection picks and a pass can form the fused top-k from the chain.
#include "ir/ops.h"

namespace kvf::ir::ops {

V rank_below(V scores, int64_t k, V among) {
  if (!scores.valid()) return scores;  // a failed trace has no shape: stay poisoned
  Builder& b = *scores.b;
  const Shape s = scores.shape();
  const int64_t e = s.back();
  Shape pairs = s, mine_shape = s, theirs_shape = s;
  pairs.push_back(e);  // [.., e, j]: entry e against entry j
  mine_shape.push_back(1);
  theirs_shape.back() = 1;
  theirs_shape.push_back(e);
  V mine = b.broadcast(b.reshape(scores, mine_shape), pairs);
  V theirs = b.broadcast(b.reshape(scores, theirs_shape), pairs);
  V lower_index = b.compare(b.iota({e, e}, 1), b.iota({e, e}, 0), CmpDir::kLt);  // j < e
  V before = b.select(b.broadcast(lower_index, pairs), b.like(scores, 1.0), b.like(scores, 0.0));
  V above = b.select(b.compare(theirs, mine, CmpDir::kGt), b.like(scores, 1.0), b.like(scores, 0.0));
  V tied = b.select(b.compare(theirs, mine, CmpDir::kEq), before, b.like(scores, 0.0));
  V ahead = above + tied;
  if (among.valid()) ahead = b.select(b.broadcast(b.reshape(among, theirs_shape), pairs), ahead, b.like(scores, 0.0));
  V rank = b.reduce_sum(ahead, {static_cast<int64_t>(s.size())});
  return b.compare(rank, b.like(rank, static_cast<double>(k)), CmpDir::kLt);
}

V block_last_positions(Builder& b, int64_t n_blocks, int64_t ratio) {
  return b.iota({1, n_blocks}, 1) * static_cast<double>(ratio) + static_cast<double>(ratio - 1);
}

V blocks_against(V pos, int64_t n_blocks, int64_t ratio, CmpDir dir) {
  if (!pos.valid()) return pos;
  Builder& b = *pos.b;
  const int64_t rows = pos.dim(0);
  return b.compare(b.broadcast(block_last_positions(b, n_blocks, ratio), {rows, n_blocks}),
                   b.broadcast(b.reshape(pos, {rows, 1}), {rows, n_blocks}), dir);
}

V block_topk(V scores, V pos, int64_t k, int64_t ratio) {
  if (!scores.valid()) return scores;
  if (!pos.valid()) return pos;
  Builder& b = *scores.b;
  const Shape s = scores.shape();  // [R, n, NB]
  V candidates = b.reshape(blocks_against(pos, s[2], ratio, CmpDir::kLe), s);  // complete blocks
  return b.binary(OpKind::kAnd, candidates, rank_below(scores, k, candidates));
}

V indexer_scores(V q, V k, V w, double scale) {
  if (!q.valid()) return q;
  if (!k.valid()) return k;
  Builder& b = *q.b;
  const int64_t r = q.dim(0), h = q.dim(1), n = q.dim(2), d = q.dim(3), lk = k.dim(2);
  V dots = b.matmul(b.reshape(q, {r, 1, h * n, d}), b.transpose(k, {0, 1, 3, 2}));  // [R, 1, H n, L]
  V per_head = relu(b.reshape(dots, {r, h, n, lk}) * scale);
  return b.reduce_sum(per_head * b.broadcast(w, {r, h, n, lk}), {1});
}

}  // namespace kvf::ir::ops
