// Reduction tree construction and its mesh embedding (tree.h).
#include "exec/ahbm/tree.h"

#include <algorithm>
#include <cstdlib>

namespace kvf::ahbm {

ReductionTree make_tree(int n) {
  ReductionTree t;
  t.n = n;
  t.root = n - 1;
  t.parent.assign(static_cast<size_t>(n), -1);
  t.children.assign(static_cast<size_t>(n), {});
  // Work in j = n - 1 - r, where this is the binomial tree rooted at j = 0: at level k the
  // node j with j mod 2^(k+1) == 2^k sends to j - 2^k.
  for (int stride = 1; stride < n; stride *= 2, ++t.depth) {
    for (int j = stride; j < n; j += 2 * stride) {
      const int child = n - 1 - j, parent = n - 1 - (j - stride);
      t.parent[static_cast<size_t>(child)] = parent;
      t.children[static_cast<size_t>(parent)].push_back(child);
    }
  }
  return t;
}

namespace {

struct Search {
  const ReductionTree& t;
  int rows, cols;
  std::vector<bool> free;
  std::vector<int> order;  // ranks, each after its parent
  std::vector<MeshPos> pos;

  bool place(size_t i) {
    if (i == order.size()) return true;
    const int r = order[i];
    const int p = t.parent[static_cast<size_t>(r)];
    std::vector<MeshPos> options;
    if (p < 0) {
      for (int row = 0; row < rows; ++row)
        for (int col = 0; col < cols; ++col) options.push_back({row, col});
    } else {
      const MeshPos at = pos[static_cast<size_t>(p)];
      options = {{at.row - 1, at.col}, {at.row, at.col + 1}, {at.row + 1, at.col}, {at.row, at.col - 1}};
    }
    for (MeshPos m : options) {
      if (m.row < 0 || m.col < 0 || m.row >= rows || m.col >= cols) continue;
      const size_t cell = static_cast<size_t>(m.row * cols + m.col);
      if (!free[cell]) continue;
      free[cell] = false;
      pos[static_cast<size_t>(r)] = m;
      if (place(i + 1)) return true;
      free[cell] = true;
    }
    return false;
  }
};

std::vector<MeshPos> naive(int n, int rows, int cols, const std::vector<bool>& free) {
  std::vector<MeshPos> pos;
  for (int row = 0; row < rows && static_cast<int>(pos.size()) < n; ++row)
    for (int col = 0; col < cols && static_cast<int>(pos.size()) < n; ++col)
      if (free[static_cast<size_t>(row * cols + col)]) pos.push_back({row, col});
  return pos;
}

}  // namespace

Result<std::vector<MeshPos>> embed_tree(const ReductionTree& t, int rows, int cols, const std::vector<bool>& free,
                                        Mapping mapping) {
  if (std::count(free.begin(), free.end(), true) < t.n) {
    return capacity("ahbm: a reduction group of ", t.n, " PEs does not fit the free PEs of a ", rows, "x", cols, " mesh");
  }
  if (mapping == Mapping::kNeighbour) {
    Search s{t, rows, cols, free, {}, std::vector<MeshPos>(static_cast<size_t>(t.n))};
    // Breadth-first from the root, so every rank is placed after its parent.
    s.order.push_back(t.root);
    for (size_t i = 0; i < s.order.size(); ++i)
      for (int c : t.children[static_cast<size_t>(s.order[i])]) s.order.push_back(c);
    if (s.place(0)) return s.pos;
  }
  return naive(t.n, rows, cols, free);
}

int max_edge_hops(const ReductionTree& t, const std::vector<MeshPos>& pos) {
  int worst = 0;
  for (int r = 0; r < t.n; ++r) {
    const int p = t.parent[static_cast<size_t>(r)];
    if (p >= 0) worst = std::max(worst, mesh_hops(pos[static_cast<size_t>(r)], pos[static_cast<size_t>(p)]));
  }
  return worst;
}

}  // namespace kvf::ahbm
