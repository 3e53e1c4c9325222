// The selection pass: the selected-block mask, the block top-k and the indexer's scores that
// ops:: traces become SelectedAttention, BlockTopK and IndexerScores eqns, the first two with
// the same results on the oracle, and whatever is not exactly those compositions keeps its
// eqns. The kernels behind them run against the
// oracle in tests/exec/selection_kernel_test.cpp.
#include <gtest/gtest.h>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::OpKind;
using ir::V;
namespace ops = ir::ops;

struct Shape4 {
  int64_t batch = 1, heads = 4, kv_heads = 1, lq = 1, lk = 32, dim = 8, topk = 2, ratio = 4;
};

// Attention of `lq` queries at positions lk - lq .. lk - 1 over lk keys, through the mask
// rest + selected_mask(block_topk(scores, pos)); `select` replaces the block top-k.
ir::Graph selected_graph(const Shape4& s, std::mt19937_64& rng, const std::function<V(V scores, V pos)>& select = {}) {
  ir::Builder b("selected");
  const int64_t blocks = (s.lk + s.ratio - 1) / s.ratio;
  V q = testing::input(b, "q", testing::random_buffer(rng, {s.batch, s.heads, s.lq, s.dim}));
  V k = testing::input(b, "k", testing::random_buffer(rng, {s.batch, s.kv_heads, s.lk, s.dim}));
  V v = testing::input(b, "v", testing::random_buffer(rng, {s.batch, s.kv_heads, s.lk, s.dim}));
  V scores = testing::input(b, "scores", testing::random_buffer(rng, {s.batch, s.lq, blocks}));
  std::vector<int> p;
  for (int64_t r = 0; r < s.batch; ++r) {
    for (int64_t i = 0; i < s.lq; ++i) p.push_back(static_cast<int>(s.lk - s.lq + i - r));
  }
  V pos = testing::input(b, "pos", testing::must(eval::Buffer::i32({s.batch * s.lq}, p)));
  V sel = select ? select(scores, pos) : ops::block_topk(scores, pos, s.topk, s.ratio);
  V rest = testing::input(b, "rest", testing::random_buffer(rng, {s.batch, 1, s.lq, s.lk}));
  V mask = rest + ops::selected_mask(sel, pos, s.lk, s.ratio);
  b.output("out", ops::attention_prefill(q, k, v, mask, {.scale = 0.35, .softcap = 0}));
  return testing::must(b.finish());
}

std::vector<compile::Pass> up_to_attention() {
  return {compile::canonicalize_pass(), compile::cse_pass(), compile::rope_pass(), compile::attention_pass()};
}

TEST(SelectionPass, FormsSelectedAttentionAndBlockTopKWithTheChainsResults) {
  std::mt19937_64 rng(testing::test_seed());
  for (const Shape4& s : {Shape4{}, Shape4{.batch = 2, .lq = 3, .lk = 40, .topk = 3, .ratio = 16},
                          Shape4{.lq = 2, .lk = 20, .topk = 7, .ratio = 1}}) {
    SCOPED_TRACE(str_cat("ratio ", s.ratio, " batch ", s.batch, " lq ", s.lq));
    const ir::Graph traced = selected_graph(s, rng);
    const ir::Graph attended = testing::must(compile::run_passes(traced, up_to_attention())).graph;
    const ir::Graph selected = testing::must(compile::selection_pass().run(attended));
    EXPECT_EQ(testing::count_op(selected, OpKind::kSelectedAttention), 1);
    EXPECT_EQ(testing::count_op(selected, OpKind::kAttention), 0);
    const ir::Eqn* topk = testing::find_eqn(selected, OpKind::kBlockTopK);
    ASSERT_NE(topk, nullptr);
    EXPECT_EQ(topk->params.topk, s.topk);
    EXPECT_EQ(topk->params.ratio, s.ratio);
    EXPECT_EQ(testing::find_eqn(selected, OpKind::kSelectedAttention)->params.ratio, s.ratio);
    testing::expect_same_outputs(attended, selected);  // exact: the oracle's bits
    // dce then drops the pairwise ranks: no [.., NB, NB] comparison is left.
    const ir::Graph compiled = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
    EXPECT_EQ(testing::count_op(compiled, OpKind::kCompare), 0) << ir::print(compiled);
  }
}

// A block top-k no attention reads (an indexer's selection on its own) is still one eqn.
TEST(SelectionPass, ABlockTopKAloneIsOneEqn) {
  std::mt19937_64 rng(testing::test_seed());
  for (int64_t ratio : {1, 16}) {
    ir::Builder b("topk");
    V scores = testing::input(b, "scores", testing::random_buffer(rng, {2, 3, 9}));
    V pos = testing::input(b, "pos", testing::must(eval::Buffer::i32({6}, {3, 40, 100, 143, 0, 17})));
    b.output("selected", b.cast(ops::block_topk(scores, pos, 4, ratio), DType::kF32));
    const ir::Graph traced = testing::must(b.finish());
    const ir::Graph compiled = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
    const ir::Eqn* e = testing::find_eqn(compiled, OpKind::kBlockTopK);
    ASSERT_NE(e, nullptr) << ratio;
    EXPECT_EQ(e->params.ratio, ratio);
    EXPECT_EQ(testing::count_op(compiled, OpKind::kCompare), 0) << ir::print(compiled);
    testing::expect_same_outputs(traced, compiled);
  }
}

TEST(SelectionPass, ASelectionThatIsNotBlockTopKStaysAsItIs) {
  std::mt19937_64 rng(testing::test_seed());
  const Shape4 s;
  const ir::Graph traced = selected_graph(s, rng, [](V scores, V) {
    return scores.b->compare(scores, scores.b->like(scores, 0.0), ir::CmpDir::kGt);  // not a top-k
  });
  const ir::Graph compiled = testing::must(compile::run_passes(traced, compile::default_passes())).graph;
  EXPECT_EQ(testing::count_op(compiled, OpKind::kSelectedAttention), 1);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kBlockTopK), 0);
  // Two block top-ks and'ed: each is one, their and is neither.
  const ir::Graph both = selected_graph(s, rng, [](V scores, V pos) {
    V top2 = ops::block_topk(scores, pos, 2, 4);
    return top2.b->binary(OpKind::kAnd, top2, ops::block_topk(scores, pos, 3, 4));
  });
  const ir::Graph both_compiled = testing::must(compile::run_passes(both, compile::default_passes())).graph;
  EXPECT_EQ(testing::count_op(both_compiled, OpKind::kBlockTopK), 2);
  EXPECT_EQ(testing::count_op(both_compiled, OpKind::kAnd), 1);
}

TEST(SelectionPass, MasksAndKeysItCannotProveOrReadKeepTheirEqns) {
  std::mt19937_64 rng(testing::test_seed());
  // Two key heads, dense: the kernel reads selected keys as pool rows of one head.
  const ir::Graph gqa = selected_graph({.heads = 4, .kv_heads = 2}, rng);
  const ir::Graph compiled = testing::must(compile::run_passes(gqa, compile::default_passes())).graph;
  EXPECT_EQ(testing::count_op(compiled, OpKind::kSelectedAttention), 0);
  EXPECT_EQ(testing::count_op(compiled, OpKind::kAttention), 1);
  // A selected mask with the wrong ratio for its blocks is a mask like any other.
  ir::Builder b("not_selected");
  V q = testing::input(b, "q", testing::random_buffer(rng, {1, 2, 1, 8}));
  V k = testing::input(b, "k", testing::random_buffer(rng, {1, 1, 16, 8}));
  V raw = testing::input(b, "sel", testing::random_buffer(rng, {1, 1, 16}));
  V sel = b.compare(raw, b.like(raw, 0.0), ir::CmpDir::kGt);
  V pos = testing::input(b, "pos", testing::must(eval::Buffer::i32({1}, {15})));
  V mask = ops::selected_mask(sel, pos, 16, 1) * 2.0;  // -inf * 2: the same words, not the composition
  b.output("out", ops::attention_prefill(q, k, k, mask, {.scale = 0.5, .softcap = 0}));
  const ir::Graph scaled = testing::must(compile::run_passes(testing::must(b.finish()), compile::default_passes())).graph;
  EXPECT_EQ(testing::count_op(scaled, OpKind::kSelectedAttention), 0);
}

// DeepSeek-V3.2's steps, contiguous and paged: one IndexerScores, one BlockTopK and one
// SelectedAttention per layer, over the latent's split key; no other product is left.
TEST(SelectionPass, DeepSeekV32StepsSelectInEveryLayer) {
  const models::Model m = testing::open_test_model("deepseek_v32");
  for (const models::StepSpec& spec : {models::StepSpec{.n_tokens = 1, .capacity = 48},
                                       models::StepSpec{.n_tokens = 5, .capacity = 48},
                                       models::StepSpec{.n_tokens = 2, .capacity = 48, .pool_slots = 64, .rows = 3}}) {
    const ir::Graph g = testing::must(compile::run_passes(testing::must(m.trace_step(spec)), compile::default_passes())).graph;
    EXPECT_EQ(testing::count_op(g, OpKind::kSelectedAttention), m.config.n_layers) << g.name;
    EXPECT_EQ(testing::count_op(g, OpKind::kBlockTopK), m.config.n_layers) << g.name;
    EXPECT_EQ(testing::count_op(g, OpKind::kIndexerScores), m.config.n_layers) << g.name;
    EXPECT_EQ(testing::count_op(g, OpKind::kMatMul), 2 * m.config.n_layers) << g.name;  // MLA's absorbed W_uk, W_uv
    const ir::Eqn* e = testing::find_eqn(g, OpKind::kSelectedAttention);
    EXPECT_TRUE(e->params.attn.has_shared) << g.name;
    EXPECT_EQ(e->params.attn.has_read, spec.pool_slots > 0) << g.name;
  }
}

}  // namespace
}  // namespace kvf
