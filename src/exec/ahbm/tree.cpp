// Reduction tree construction and its mesh embedding (tree.h).
#include "exec/ahbm/tree.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

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
  std::function<bool(const std::vector<MeshPos>&)> accept{};  // a whole placement; empty: any

  bool place(size_t i) {
    if (i == order.size()) return !accept || accept(pos);
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

// Every rank placed after its parent: breadth-first from the root.
Search search(const ReductionTree& t, int rows, int cols, const std::vector<bool>& free) {
  Search s{t, rows, cols, free, {}, std::vector<MeshPos>(static_cast<size_t>(t.n))};
  s.order.push_back(t.root);
  for (size_t i = 0; i < s.order.size(); ++i)
    for (int c : t.children[static_cast<size_t>(s.order[i])]) s.order.push_back(c);
  return s;
}

}  // namespace

Result<std::vector<MeshPos>> embed_tree(const ReductionTree& t, int rows, int cols, const std::vector<bool>& free,
                                        Mapping mapping) {
  if (std::count(free.begin(), free.end(), true) < t.n) {
    return capacity("ahbm: a reduction group of ", t.n, " PEs does not fit the free PEs of a ", rows, "x", cols, " mesh");
  }
  if (mapping == Mapping::kNeighbour) {
    Search s = search(t, rows, cols, free);
    if (s.place(0)) return s.pos;
  }
  return naive(t.n, rows, cols, free);
}

Result<std::vector<MeshPos>> embed_ring(int n, int rows, int cols, const std::vector<bool>& free, Mapping mapping) {
  // The ring as a chain 0 → 1 → … → n-1 (each rank one hop from the one before), first
  // with the closing edge n-1 → 0 one hop too, then with any closing edge.
  ReductionTree chain;
  chain.n = n;
  chain.parent.assign(static_cast<size_t>(n), -1);
  chain.children.assign(static_cast<size_t>(n), {});
  for (int r = 1; r < n; ++r) {
    chain.parent[static_cast<size_t>(r)] = r - 1;
    chain.children[static_cast<size_t>(r - 1)].push_back(r);
  }
  if (mapping == Mapping::kNeighbour) {
    Result<std::vector<MeshPos>> fits = embed_tree(chain, rows, cols, free, Mapping::kNaive);  // the capacity check
    if (!fits) return fits;
    Search closed = search(chain, rows, cols, free);
    closed.accept = [](const std::vector<MeshPos>& p) { return mesh_hops(p.back(), p.front()) <= 1; };
    if (closed.place(0)) return closed.pos;
  }
  return embed_tree(chain, rows, cols, free, mapping);
}

int max_ring_hops(const std::vector<MeshPos>& pos) {
  int worst = 0;
  for (size_t r = 0; r < pos.size(); ++r) worst = std::max(worst, mesh_hops(pos[r], pos[(r + 1) % pos.size()]));
  return worst;
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
