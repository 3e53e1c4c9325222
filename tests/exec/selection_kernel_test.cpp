// Selected attention's CPU kernels against the oracle: the chain ops:: traces (block_topk's
// pairwise ranks, selected_mask, the attention over every key) run on the oracle, and the
// compiled BlockTopK + SelectedAttention on the CPU executor, on random shapes: ratios 1, 16
// and 64, more blocks asked for than there are, rows early in the sequence, several query
// rows, shared and per-head masks, a live length, coarse scores that tie and NaN scores.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "cpu_vs_oracle.h"
#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
namespace ops = ir::ops;

struct Case {
  int64_t batch, heads, lq, lk, dim, topk, ratio, mask_heads;
  bool live_len = false, nan_scores = false;
};

// Scores on a grid of 8 values (ties), with a NaN every 7th block when asked.
eval::Buffer coarse_scores(std::mt19937_64& rng, Shape shape, bool nans) {
  eval::Buffer b = testing::random_buffer(rng, shape);
  for (size_t i = 0; i < b.data.size(); ++i) {
    b.data[i] = std::round(b.data[i] * 4) / 4;
    if (nans && i % 7 == 3) b.data[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return b;
}

ir::Graph traced(const Case& c, std::mt19937_64& rng) {
  ir::Builder b("selected");
  const int64_t blocks = (c.lk + c.ratio - 1) / c.ratio;
  V q = testing::input(b, "q", testing::random_buffer(rng, {c.batch, c.heads, c.lq, c.dim + 4}));
  V k = testing::input(b, "k", testing::random_buffer(rng, {c.batch, 1, c.lk, c.dim}));
  V shared = testing::input(b, "k_rot", testing::random_buffer(rng, {c.batch, 1, c.lk, 4}));
  V scores = testing::input(b, "scores", coarse_scores(rng, {c.batch, c.lq, blocks}, c.nan_scores));
  std::vector<int> p;  // row r's queries end at a position of its own, some early
  for (int64_t r = 0; r < c.batch; ++r) {
    const int64_t last = r == 0 ? c.lk - 1 : static_cast<int64_t>(rng() % static_cast<uint64_t>(c.lk));
    for (int64_t i = 0; i < c.lq; ++i) p.push_back(static_cast<int>(std::max<int64_t>(0, last - (c.lq - 1 - i))));
  }
  V pos = testing::input(b, "pos", testing::must(eval::Buffer::i32({c.batch * c.lq}, p)));
  V sel = ops::block_topk(scores, pos, c.topk, c.ratio);
  V rest = testing::input(b, "rest", testing::random_buffer(rng, {c.batch, c.mask_heads, c.lq, c.lk}));
  V mask = rest + ops::selected_mask(sel, pos, c.lk, c.ratio);
  const ops::AttnOpts opts{.scale = 0.3, .softcap = 0};
  V key = b.concat({k, shared}, 3);  // the split key MLA's latent attention reads
  if (!c.live_len) {
    b.output("out", ops::attention_prefill(q, key, k, mask, opts));
  } else {
    std::vector<int> len;
    for (int64_t r = 0; r < c.batch; ++r) len.push_back(static_cast<int>(std::min<int64_t>(c.lk, p[static_cast<size_t>(r * c.lq + c.lq - 1)] + 1)));
    V l = testing::input(b, "len", testing::must(eval::Buffer::i32({c.batch}, len)));
    b.output("out", ops::attention_live(q, key, k, l, mask, opts));
  }
  b.output("selected", b.cast(sel, DType::kF32));
  return testing::must(b.finish());
}

TEST(SelectionKernels, MatchTheOracleOnRandomShapes) {
  std::mt19937_64 rng(testing::test_seed());
  const Case cases[] = {
      {.batch = 1, .heads = 4, .lq = 1, .lk = 300, .dim = 16, .topk = 20, .ratio = 1, .mask_heads = 1},
      {.batch = 2, .heads = 3, .lq = 4, .lk = 200, .dim = 8, .topk = 3, .ratio = 16, .mask_heads = 3},
      {.batch = 3, .heads = 2, .lq = 2, .lk = 700, .dim = 8, .topk = 5, .ratio = 64, .mask_heads = 1, .live_len = true},
      {.batch = 1, .heads = 2, .lq = 3, .lk = 130, .dim = 8, .topk = 40, .ratio = 16, .mask_heads = 1},  // K > blocks
      {.batch = 2, .heads = 2, .lq = 1, .lk = 1500, .dim = 8, .topk = 700, .ratio = 1, .mask_heads = 1,
       .nan_scores = true},  // past one piece: split-KV over the listed keys
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat("ratio ", c.ratio, " lk ", c.lk, " k ", c.topk, " batch ", c.batch, " lq ", c.lq));
    const ir::Graph g = traced(c, rng);
    const ir::Graph compiled = testing::must(compile::run_passes(g, compile::default_passes())).graph;
    ASSERT_EQ(testing::count_op(compiled, OpKind::kSelectedAttention), 1);
    ASSERT_EQ(testing::count_op(compiled, OpKind::kBlockTopK), 1);
    // The selection bit for bit (a pred cast to f32: one flip is far past the tolerance),
    // the attention within float rounding: against the fused eqns' own reference loops, and
    // against the chain they replaced.
    testing::expect_cpu_matches_oracle(compiled, compiled, {}, 1e-5);
    testing::expect_cpu_matches_oracle(g, compiled, {}, 1e-5);
  }
}

// The indexer's scores alone: heads past, within and short of one vector, keys past one
// task and not a multiple of the four a group takes, f32 and f16 keys.
TEST(SelectionKernels, IndexerScoresMatchTheOracle) {
  std::mt19937_64 rng(testing::test_seed());
  struct Scores {
    int64_t rows, heads, n, dim, keys;
    DType k_type;
  };
  for (const Scores& c : {Scores{1, 64, 1, 128, 1203, DType::kF32}, Scores{2, 20, 3, 16, 77, DType::kF16},
                          Scores{1, 7, 2, 24, 600, DType::kF32}}) {
    SCOPED_TRACE(str_cat(c.heads, " heads, dim ", c.dim, ", ", c.keys, " keys, ", dtype_name(c.k_type)));
    ir::Builder b("indexer");
    V q = testing::input(b, "q", testing::random_buffer(rng, {c.rows, c.heads, c.n, c.dim}));
    V k = testing::input(b, "k", testing::random_buffer(rng, {c.rows, 1, c.keys, c.dim}));
    if (c.k_type == DType::kF16) k = b.cast(b.cast(k, DType::kF16), DType::kF32);  // an f16 cache, widened
    V w = testing::input(b, "w", testing::random_buffer(rng, {c.rows, c.heads, c.n, 1}));
    b.output("scores", ops::indexer_scores(q, k, w, 1.0 / std::sqrt(static_cast<double>(c.dim))));
    const ir::Graph g = testing::must(b.finish());
    const ir::Graph compiled = testing::must(compile::run_passes(g, compile::default_passes())).graph;
    const ir::Eqn* e = testing::find_eqn(compiled, OpKind::kIndexerScores);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(compiled.type(e->in[1]).dtype, c.k_type);  // f16 keys read as stored
    testing::expect_cpu_matches_oracle(compiled, compiled, {}, 1e-5);
    testing::expect_cpu_matches_oracle(g, compiled, {}, 1e-5);
  }
}

}  // namespace
}  // namespace kvf
