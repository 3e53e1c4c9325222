#include "exec/cpu/lora.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "exec/cpu/linear.h"
#include "exec/cpu/lora_up.h"

namespace kvf::exec::cpu {
namespace {

// Below this many multiply-adds an adapter's rows are one task: a decode row's products (rank
// 16 over 768-wide projections: 25k) cost less than waking the pool twice for them.
constexpr int64_t kInlineMacs = int64_t{1} << 17;
// A batched decode's adapters, each with at most this many rows, run side by side as well
// when there are enough of them to keep every thread busy (16 rows over 4 rank-16 adapters:
// half the time of each adapter's products split over the pool in turn).
constexpr int64_t kSideBySideRows = 16;

// Columns of a prefill task's share of Bᵀ: whole vectors.
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

// One adapter's rows of the step: where they are, and its factors. Its slice of the scratch
// starts at its first row's place in `picked`: x gathered there ([m, in] of [rows, in]) and
// A x ([m, rank] of [rows, rank]).
struct Group {
  const int32_t* rows;  // [m] row indices
  int64_t m;
  float* xs;
  float* ax;
  const void* a;   // [rank, in]
  const void* bt;  // [rank, out]
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
    const int64_t bytes = block_bytes(a.factors);  // f32 or f16: one element a block
    float* xs = a.scratch + a.rows + begin * a.in;
    groups.push_back({picked + begin, m, xs, a.scratch + a.rows + a.rows * a.in + begin * a.rank,
                      static_cast<const char*>(a.a) + e * a.rank * a.in * bytes,
                      static_cast<const char*>(a.b) + e * a.rank * a.out * bytes, a.s[e]});
  }
  return groups;
}

// x's rows of g gathered, then through A.
void down(ThreadPool& pool, const LoraArgs& a, const Group& g) {
  for (int64_t i = 0; i < g.m; ++i) std::memcpy(g.xs + i * a.in, a.x + g.rows[i] * a.in, static_cast<size_t>(a.in) * sizeof(float));
  linear(pool, g.xs, g.m, a.in, WeightView{a.factors, g.a, a.rank, a.in}, nullptr, g.ax, a.rank);
}

// A decode's few rows: each adapter's rows are one task, A x and then the term, so the whole
// eqn is one parallel_for over the adapters, and a single adapter (a lone decode) runs inline
// on the calling thread. Splitting one adapter's columns over threads measured slower: with
// its A x repeated per part and a wake-up per eqn, a decode's term costs more than it saves.
void few_rows(ThreadPool& pool, const LoraArgs& a, const std::vector<Group>& groups) {
  pool.parallel_for(static_cast<int64_t>(groups.size()), [&](int64_t g0, int64_t g1) {
    thread_local ThreadPool alone(1);
    for (int64_t i = g0; i < g1; ++i) {
      const Group& g = groups[static_cast<size_t>(i)];
      down(alone, a, g);
      lora_up({.ax = g.ax, .m = g.m, .rank = a.rank, .out = a.out, .c0 = 0, .c1 = a.out, .type = a.factors, .bt = g.bt,
               .s = g.s, .rows = g.rows, .y = a.y, .result = a.result});
    }
  });
}

// Many rows (a prefill): one adapter after another, each product split over the pool.
void many_rows(ThreadPool& pool, const LoraArgs& a, const std::vector<Group>& groups) {
  for (const Group& g : groups) {
    down(pool, a, g);
    const int64_t parts = (a.out + kColumnAlign - 1) / kColumnAlign;
    pool.parallel_for(parts, [&](int64_t p0, int64_t p1) {
      lora_up({.ax = g.ax, .m = g.m, .rank = a.rank, .out = a.out, .c0 = p0 * kColumnAlign,
               .c1 = std::min(a.out, p1 * kColumnAlign), .type = a.factors, .bt = g.bt, .s = g.s, .rows = g.rows,
               .y = a.y, .result = a.result});
    });
  }
}

}  // namespace

// The reference body: one column at a time, std::fma a call per element where the baseline
// ISA has no fused multiply-add (the vector bodies serve every x86 CPU with AVX2).
void lora_up_portable(const LoraUp& u) {
  if (u.type == DType::kF16) {
    detail::lora_up_columns<uint16_t>(u, u.c0, u.c1);
  } else {
    detail::lora_up_columns<float>(u, u.c0, u.c1);
  }
}

void lora(ThreadPool& pool, const LoraArgs& a) {
  if (a.result != a.y) {  // the base model's rows are y; an adapter's are written from y below
    for (int64_t t = 0; t < a.rows; ++t) {
      if (a.ids[t] == 0) std::memcpy(a.result + t * a.out, a.y + t * a.out, static_cast<size_t>(a.out) * sizeof(float));
    }
  }
  auto* picked = reinterpret_cast<int32_t*>(a.scratch);
  const std::vector<Group>& groups = group_rows(a, picked);
  if (groups.empty()) return;  // every row the base model's
  int64_t widest = 0;
  for (const Group& g : groups) widest = std::max(widest, g.m);
  const bool side_by_side = widest * (a.in + a.out) * a.rank <= kInlineMacs ||
                            (std::ssize(groups) >= pool.size() && widest <= kSideBySideRows);
  if (side_by_side) {
    few_rows(pool, a, groups);
  } else {
    many_rows(pool, a, groups);
  }
}

}  // namespace kvf::exec::cpu
