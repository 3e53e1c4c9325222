// Golden tests of printed graphs: the attention_masked chain (the seed's eqns, one per line),
// the live form, and the selected-attention eqns the compiler forms.
// Regenerate after an intended printer change with KVF_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "testing.h"

namespace kvf {
namespace {

using ir::Builder;
using ir::OpKind;
using ir::V;
namespace ops = ir::ops;

ir::Graph decode_attention_graph() {
  Builder b("decode_attention");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V q = b.slot(ir::Slot::kToken, DType::kI32, {1});  // unused slot: shows slot listing
  (void)q;
  V kc = b.state("k_cache", DType::kF32, {1, 2, 16, 8}, ir::StateRole::kKeyCache, 0);
  V vc = b.state("v_cache", DType::kF32, {1, 2, 16, 8}, ir::StateRole::kValueCache, 0);
  V query = b.constant("q", testing::must(HostTensor::zeros(DType::kF32, {1, 4, 1, 8})));
  V k = b.constant("k", testing::must(HostTensor::zeros(DType::kF32, {1, 2, 1, 8})));
  V v = b.constant("v", testing::must(HostTensor::zeros(DType::kF32, {1, 2, 1, 8})));
  V mask = ops::causal_mask(pos, 16);
  auto r = ops::attention_masked(query, k, v, kc, vc, pos, mask, {.scale = 0.125, .softcap = 0});
  b.output("out", r.out);
  return testing::must(b.finish());
}

ir::Graph live_attention_graph() {
  Builder b("live_attention");
  V len = b.slot(ir::Slot::kSeqLen, DType::kI32, {1});
  V query = b.constant("q", testing::must(HostTensor::zeros(DType::kF32, {1, 2, 1, 4})));
  V k = b.constant("k_cache", testing::must(HostTensor::zeros(DType::kF32, {1, 1, 8, 4})));
  V v = b.constant("v_cache", testing::must(HostTensor::zeros(DType::kF32, {1, 1, 8, 4})));
  b.output("out", ops::attention_live(query, k, v, len, V{}, {.scale = 0.5, .softcap = 0}));
  return testing::must(b.finish());
}

// A decode step's selected attention after the compiler: block_topk over the indexer's scores
// and selected_attention over the cache (the chains they replace are gone).
ir::Graph selected_attention_graph() {
  Builder b("selected_attention");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {1});
  V query = b.constant("q", testing::must(HostTensor::zeros(DType::kF32, {1, 2, 1, 8})));
  V k = b.constant("k_cache", testing::must(HostTensor::zeros(DType::kF32, {1, 1, 16, 8})));
  V scores = b.constant("scores", testing::must(HostTensor::zeros(DType::kF32, {1, 1, 4})));
  V selected = ops::block_topk(scores, pos, 2, 4);
  V mask = ops::causal_mask(pos, 16) + ops::selected_mask(selected, pos, 16, 4);
  b.output("out", ops::attention_prefill(query, k, k, mask, {.scale = 0.125, .softcap = 0}));
  return testing::must(compile::run_passes(testing::must(b.finish()), compile::default_passes())).graph;
}

std::string golden_path(const std::string& name) { return testing::source_dir() + "/tests/ir/golden/" + name; }

void expect_golden(const std::string& printed, const std::string& file) {
  const std::string path = golden_path(file);
  if (std::getenv("KVF_UPDATE_GOLDEN")) {
    std::ofstream(path) << printed;
    // Only ever with the explicit update flag, which a KVF_REQUIRE_MODELS=1 (CI) run never sets.
    if (testing::models_required()) FAIL() << "KVF_UPDATE_GOLDEN rewrote " << path << " in a KVF_REQUIRE_MODELS=1 run";
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path;
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(printed, want.str());
}

TEST(PrinterGolden, AttentionMaskedChain) { expect_golden(ir::print(decode_attention_graph()), "attention_masked.txt"); }

TEST(PrinterGolden, SelectedAttentionEqns) {
  expect_golden(ir::print(selected_attention_graph()), "selected_attention.txt");
}

// The live form: index guard with its witness, true selects on K/V rows and scores.
TEST(PrinterGolden, AttentionLiveChain) { expect_golden(ir::print(live_attention_graph()), "attention_live.txt"); }

// Independent of the printer: the eqn sequence after the mask is exactly the seed's chain.
TEST(PrinterGolden, ChainOpcodesFollowTheSeed) {
  const ir::Graph g = decode_attention_graph();
  std::vector<OpKind> ops_after_mask;
  bool in_chain = false;
  for (const ir::Eqn& e : g.eqns) {
    if (e.op == OpKind::kDynamicUpdateSlice) in_chain = true;
    if (in_chain) ops_after_mask.push_back(e.op);
  }
  const std::vector<OpKind> seed_chain{
      OpKind::kDynamicUpdateSlice, OpKind::kDynamicUpdateSlice,                 // KV write at pos
      OpKind::kReshape, OpKind::kBroadcast, OpKind::kReshape,                  // repeat_kv(k)
      OpKind::kReshape, OpKind::kBroadcast, OpKind::kReshape,                  // repeat_kv(v)
      OpKind::kTranspose, OpKind::kMatMul,                                     // q · kᵀ
      OpKind::kMul, OpKind::kAdd,                                              // scale, mask
      OpKind::kReduceMax, OpKind::kCompare, OpKind::kSelect, OpKind::kSub, OpKind::kExp,  // softmax, with
      OpKind::kReduceSum, OpKind::kSelect, OpKind::kDiv,  // the guard that makes a row with no key zeros
      OpKind::kMatMul};                                                        // p · v
  EXPECT_EQ(ops_after_mask, seed_chain);
  ASSERT_EQ(g.donations.size(), 2u);
  EXPECT_EQ(g.value(g.donations[0].state_in).name, "k_cache");
}

}  // namespace
}  // namespace kvf
