#include "exec/cpu/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "exec/cpu/linear.h"

namespace kvf::exec::cpu {
namespace {

// Below this many multiply-adds an adapter's rows are one task (or a few, when fewer adapters
// than threads are used): a decode row's products (rank 16 over 768-wide projections: 25k)
// cost less than waking the pool twice for them.
constexpr int64_t kInlineMacs = int64_t{1} << 17;

// Columns of a task's share of Bᵀ come in whole vectors.
constexpr int64_t kColumnAlign = 16;

void lora_up(const LoraUp& u) {
  static const std::string_view isa = linear_isa();
  if (isa == "avx512") {
    lora_up_avx512(u);
  } else if (isa == "avx2") {
    lora_up_avx2(u);
  } else {
    lora_up_portable(u);
  }
}

// One adapter's rows of the step: where they are, and its factors.
struct Group {
  const int32_t* rows;  // [m] row indices
  int64_t m;
  const float* a;  // [rank, in]
  const float* bt;  // [rank, out]
  float s;
};

// The adapters some row uses (not the base model's 0), each with its rows listed (in row
// order) in `picked`.
std::vector<Group>& group_rows(const LoraArgs& a, int32_t* picked) {
  thread_local std::vector<int64_t> start;
  thread_local std::vector<Group> groups;
  start.assign(static_cast<size_t>(a.adapters) + 1, 0);
  for (int64_t t = 0; t < a.rows; ++t) ++start[static_cast<size_t>(a.ids[t]) + 1];
  for (size_t e = 1; e < start.size(); ++e) start[e] += start[e - 1];
  for (int64_t t = 0; t < a.rows; ++t) picked[start[static_cast<size_t>(a.ids[t])]++] = static_cast<int32_t>(t);
  // start[e] now ends adapter e's rows (it began at start[e - 1], or 0)
  groups.clear();
  for (int64_t e = 1; e < a.adapters; ++e) {
    const int64_t begin = start[static_cast<size_t>(e) - 1], m = start[static_cast<size_t>(e)] - begin;
    if (m == 0) continue;
    groups.push_back({picked + begin, m, a.a + e * a.rank * a.in, a.b + e * a.rank * a.out, a.s[e]});
  }
  return groups;
}

// x's rows of g gathered into xs, then through A into ax [m, rank].
void down(ThreadPool& pool, const LoraArgs& a, const Group& g, float* xs, float* ax) {
  for (int64_t i = 0; i < g.m; ++i) std::memcpy(xs + i * a.in, a.x + g.rows[i] * a.in, static_cast<size_t>(a.in) * sizeof(float));
  linear(pool, xs, g.m, a.in, WeightView{DType::kF32, g.a, a.rank, a.in}, nullptr, ax, a.rank);
}

// Columns [begin, end) of `out` cut into `parts` near-equal whole-vector shares: share p.
std::pair<int64_t, int64_t> share(int64_t out, int64_t parts, int64_t p) {
  const int64_t vectors = (out + kColumnAlign - 1) / kColumnAlign;
  const auto cut = [&](int64_t q) { return std::min(out, vectors * q / parts * kColumnAlign); };
  return {cut(p), cut(p + 1)};
}

// A decode's few rows: every task computes its adapter's A x itself and adds its share of
// the columns, so the whole eqn is one parallel_for. With fewer adapters than threads an
// adapter's columns are split over several tasks (each repeating the small A x) rather than
// leaving threads idle.
void few_rows(ThreadPool& pool, const LoraArgs& a, const std::vector<Group>& groups) {
  const auto n = static_cast<int64_t>(groups.size());
  const int64_t parts = std::max<int64_t>(1, pool.size() / n);
  pool.parallel_for(n * parts, [&](int64_t t0, int64_t t1) {
    thread_local ThreadPool alone(1);
    thread_local std::vector<float> buf;
    for (int64_t t = t0; t < t1; ++t) {
      const Group& g = groups[static_cast<size_t>(t / parts)];
      buf.resize(static_cast<size_t>(g.m * (a.in + a.rank)));
      float* xs = buf.data();
      float* ax = xs + g.m * a.in;
      down(alone, a, g, xs, ax);
      const auto [c0, c1] = share(a.out, parts, t % parts);
      lora_up({.ax = ax, .m = g.m, .rank = a.rank, .out = a.out, .c0 = c0, .c1 = c1, .bt = g.bt, .s = g.s,
               .rows = g.rows, .result = a.result});
    }
  });
}

// Many rows (a prefill): one adapter after another, each product split over the pool.
void many_rows(ThreadPool& pool, const LoraArgs& a, const std::vector<Group>& groups, float* xs, float* ax) {
  for (const Group& g : groups) {
    down(pool, a, g, xs, ax);
    const int64_t parts = (a.out + kColumnAlign - 1) / kColumnAlign;
    pool.parallel_for(parts, [&](int64_t p0, int64_t p1) {
      lora_up({.ax = ax, .m = g.m, .rank = a.rank, .out = a.out, .c0 = p0 * kColumnAlign,
               .c1 = std::min(a.out, p1 * kColumnAlign), .bt = g.bt, .s = g.s, .rows = g.rows, .result = a.result});
    });
  }
}

}  // namespace

// LoraUp's reference body, spelled out with std::fma (a call per element where the baseline
// ISA has no fused multiply-add: the vector bodies serve every x86 CPU with AVX2).
void lora_up_portable(const LoraUp& u) {
  constexpr int64_t kBlock = 64;
  for (int64_t i = 0; i < u.m; ++i) {
    const float* ax = u.ax + i * u.rank;
    float* o = u.result + u.rows[i] * u.out;
    for (int64_t c0 = u.c0; c0 < u.c1; c0 += kBlock) {
      const int64_t w = std::min(kBlock, u.c1 - c0);
      float acc[kBlock] = {};
      for (int64_t j = 0; j < u.rank; ++j) {
        const float* bt = u.bt + j * u.out + c0;
        for (int64_t c = 0; c < w; ++c) acc[c] = std::fma(ax[j], bt[c], acc[c]);
      }
      for (int64_t c = 0; c < w; ++c) o[c0 + c] = std::fma(acc[c], u.s, o[c0 + c]);
    }
  }
}

void lora(ThreadPool& pool, const LoraArgs& a) {
  if (a.result != a.y) std::memcpy(a.result, a.y, static_cast<size_t>(a.rows * a.out) * sizeof(float));
  auto* picked = reinterpret_cast<int32_t*>(a.scratch);
  const std::vector<Group>& groups = group_rows(a, picked);
  if (groups.empty()) return;  // every row the base model's
  int64_t widest = 0;
  for (const Group& g : groups) widest = std::max(widest, g.m);
  if (widest * (a.in + a.out) * a.rank > kInlineMacs) {
    many_rows(pool, a, groups, a.scratch + a.rows, a.scratch + a.rows + a.rows * a.in);
  } else {
    few_rows(pool, a, groups);
  }
}

}  // namespace kvf::exec::cpu
