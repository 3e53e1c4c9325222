// The log-sum-exp reduction tree of ADR §4 and its placement on a CUBE's PE mesh. Rank r
// pairs with r + 2^k at level k counting from the last rank (N = 8: 0→1, 2→3, 4→5, 6→7;
// 1→3, 5→7; 3→7; root 7); depth ceil(log2 N). embed_tree picks mesh positions so that every
// tree edge joins physical neighbours (one hop), where the mesh allows it.
#pragma once

#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace kvf::ahbm {

struct ReductionTree {
  int n = 1, root = 0, depth = 0;
  std::vector<int> parent;                  // -1 at the root
  std::vector<std::vector<int>> children;   // in the order they arrive (lowest level first)
};
ReductionTree make_tree(int n);

struct MeshPos {
  int row = 0, col = 0;
  bool operator==(const MeshPos&) const = default;
};
inline int mesh_hops(MeshPos a, MeshPos b) { return std::abs(a.row - b.row) + std::abs(a.col - b.col); }

enum class Mapping {
  kNeighbour,  // search for positions with every tree edge one hop (ADR §9 item 2)
  kNaive,      // rank r on the r-th free position, row-major
};

// Positions for ranks 0..n-1 among the free cells of a rows x cols mesh (free[row*cols+col]).
// kNeighbour falls back to kNaive when no one-hop placement exists. kCapacity when fewer
// than n cells are free.
Result<std::vector<MeshPos>> embed_tree(const ReductionTree& t, int rows, int cols, const std::vector<bool>& free,
                                        Mapping mapping);
// The most hops any tree edge takes under a placement.
int max_edge_hops(const ReductionTree& t, const std::vector<MeshPos>& pos);

// Positions for the ring of ADR §5.5 (rank r sends to r + 1 mod n): kNeighbour searches for
// one-hop steps all around (a 2 x 4 mesh has such a cycle for n = 2, 4, 6, 8; an odd ring
// cannot close in one hop on a mesh, so it keeps the chain one hop and closes in more);
// kNaive numbers row-major. kCapacity when fewer than n cells are free.
Result<std::vector<MeshPos>> embed_ring(int n, int rows, int cols, const std::vector<bool>& free, Mapping mapping);
// The most hops any ring step r → r + 1 mod n takes.
int max_ring_hops(const std::vector<MeshPos>& pos);

}  // namespace kvf::ahbm
