// ADR §2 placement and §4 tree invariants: every KV token placed exactly once, per-PE
// lengths within one, slot -> global index (the RoPE position) agrees with the placement,
// one writer per step; the tree has depth ceil(log2 N) and one-hop edges on the mesh.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "exec/ahbm/decode_inputs.h"
#include "exec/ahbm/tree.h"

namespace kvf::ahbm {
namespace {

TEST(AhbmPlacement, EveryTokenOnceLengthsWithinOneSlotsAgree) {
  const AttnDims dims{.n_heads = 2, .n_kv_heads = 1, .head_dim = 2};
  for (int n : {1, 2, 3, 4, 8}) {
    for (int64_t context : {1, 5, 8, 131, 1000}) {
      for (int64_t request : {0, 1, 5, 13}) {
        // Each row carries its global index, so the placement can be read back.
        const DecodeInputs in = place_inputs(dims, DType::kF32, context, n, request, std::vector<float>(4, 0.0f),
                                             [](int64_t, int64_t t, float* k, float* v) {
                                               k[0] = k[1] = static_cast<float>(t);
                                               v[0] = v[1] = -static_cast<float>(t);
                                             });
        std::set<int64_t> seen;
        int64_t lo = context, hi = 0;
        for (int pe = 0; pe < n; ++pe) {
          const PeKv& p = in.kv[0][static_cast<size_t>(pe)];
          EXPECT_EQ(p.len, valid_len(in.geom, pe));
          lo = std::min(lo, p.len);
          hi = std::max(hi, p.len);
          for (int64_t slot = 0; slot < p.len; ++slot) {
            const int64_t global = global_of(in.geom, pe, slot);
            EXPECT_EQ(p.k[static_cast<size_t>(slot * 2)], static_cast<float>(global)) << "n " << n << " pe " << pe;
            EXPECT_EQ(owner_pe(in.geom, global), pe);
            EXPECT_EQ(slot_of(in.geom, global), slot);
            EXPECT_TRUE(seen.insert(global).second) << "token " << global << " placed twice";
          }
          for (int64_t slot = p.len; slot < in.capacity; ++slot) EXPECT_TRUE(std::isnan(p.k[static_cast<size_t>(slot * 2)]));
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), context);
        EXPECT_LE(hi - lo, 1);
        EXPECT_EQ(in.geom.start_pe, request % n);
        // Exactly one PE writes the next token, and it is the one that will hold it.
        int writers = 0;
        for (int pe = 0; pe < n; ++pe) writers += my_turn_to_write(in.geom, pe) ? 1 : 0;
        EXPECT_EQ(writers, 1);
        EXPECT_TRUE(my_turn_to_write(in.geom, owner_pe(in.geom, context)));
      }
    }
  }
}

TEST(AhbmTree, MatchesTheAdrPairsForEight) {
  const ReductionTree t = make_tree(8);
  EXPECT_EQ(t.depth, 3);
  EXPECT_EQ(t.root, 7);
  const std::vector<int> parent = {1, 3, 3, 7, 5, 7, 7, -1};  // 0→1 2→3 4→5 6→7; 1→3 5→7; 3→7
  EXPECT_EQ(t.parent, parent);
  EXPECT_EQ(t.children[7], (std::vector<int>{6, 5, 3}));  // lowest level first
}

TEST(AhbmTree, DepthIsCeilLog2AndEveryRankReachesTheRoot) {
  for (int n = 1; n <= 16; ++n) {
    const ReductionTree t = make_tree(n);
    EXPECT_EQ(t.depth, n == 1 ? 0 : static_cast<int>(std::ceil(std::log2(n)))) << n;
    for (int r = 0; r < n; ++r) {
      int at = r, steps = 0;
      while (t.parent[static_cast<size_t>(at)] >= 0 && steps <= n) at = t.parent[static_cast<size_t>(at)], ++steps;
      EXPECT_EQ(at, t.root);
      EXPECT_LE(steps, t.depth);
    }
  }
}

TEST(AhbmTree, NeighbourMappingMakesEveryEdgeOneHop) {
  const std::vector<bool> all(8, true);
  for (int n : {2, 3, 4, 8}) {
    const ReductionTree t = make_tree(n);
    Result<std::vector<MeshPos>> pos = embed_tree(t, 2, 4, all, Mapping::kNeighbour);
    ASSERT_TRUE(pos.ok());
    EXPECT_EQ(max_edge_hops(t, *pos), 1) << n;
    std::set<std::pair<int, int>> cells;
    for (MeshPos p : *pos) cells.insert({p.row, p.col});
    EXPECT_EQ(static_cast<int>(cells.size()), n);
  }
  // Row-major numbering puts 1 and 3 two hops apart, 3 and 7 one hop: the mapping matters.
  const ReductionTree t8 = make_tree(8);
  Result<std::vector<MeshPos>> naive = embed_tree(t8, 2, 4, all, Mapping::kNaive);
  ASSERT_TRUE(naive.ok());
  EXPECT_EQ(max_edge_hops(t8, *naive), 2);
  Result<std::vector<MeshPos>> too_many = embed_tree(make_tree(9), 2, 4, all, Mapping::kNeighbour);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().code(), ErrorCode::kCapacity);
}

}  // namespace
}  // namespace kvf::ahbm
