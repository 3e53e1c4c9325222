#include "exec/cpu/lora.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "exec/cpu/linear.h"

namespace kvf::exec::cpu {
namespace {

// Below this many multiply-adds an adapter's products run on one thread: handing them to the
// pool costs more than a decode row's products (rank 16 over 768-wide projections: 25k). The
// adapters of a step then run side by side instead.
constexpr int64_t kInlineMacs = int64_t{1} << 17;

// One adapter's rows (picked[0..m), in its slice of the scratch): gathered, through A and
// B, scaled and added to the result.
void adapter_rows(ThreadPool& pool, const LoraArgs& a, int64_t e, const int32_t* picked, int64_t m, float* xs, float* ax,
                  float* bax) {
  const int64_t in = a.in, out = a.out, r = a.rank;
  for (int64_t i = 0; i < m; ++i) std::memcpy(xs + i * in, a.x + picked[i] * in, static_cast<size_t>(in) * sizeof(float));
  linear(pool, xs, m, in, WeightView{DType::kF32, a.a + e * r * in, r, in}, nullptr, ax, r);
  linear(pool, ax, m, r, WeightView{DType::kF32, a.b + e * out * r, out, r}, nullptr, bax, out);
  const float s = a.s[e];
  for (int64_t i = 0; i < m; ++i) {
    float* o = a.result + picked[i] * out;
    for (int64_t c = 0; c < out; ++c) {
      const float term = bax[i * out + c] * s;  // rounded, then added: the chain's Mul and Add
      o[c] = o[c] + term;
    }
  }
}

}  // namespace

void lora(ThreadPool& pool, const LoraArgs& a) {
  const int64_t in = a.in, out = a.out, r = a.rank, rows = a.rows;
  if (a.result != a.y) std::memcpy(a.result, a.y, static_cast<size_t>(rows * out) * sizeof(float));
  // Each adapter's rows in a slice of the scratch, in adapter order: the rows' indices, x,
  // A x and B A x. Every row is in one slice, so the slices together fit `rows`.
  std::vector<int64_t> start(static_cast<size_t>(a.adapters) + 1, 0);
  for (int64_t t = 0; t < rows; ++t) ++start[static_cast<size_t>(a.ids[t]) + 1];
  for (size_t e = 1; e < start.size(); ++e) start[e] += start[e - 1];
  auto* picked = reinterpret_cast<int32_t*>(a.scratch);
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t t = 0; t < rows; ++t) picked[fill[static_cast<size_t>(a.ids[t])]++] = static_cast<int32_t>(t);
  float* xs = a.scratch + rows;
  float* ax = xs + rows * in;
  float* bax = ax + rows * r;
  std::vector<int64_t> used;  // the adapters some row uses (not the base model's 0)
  int64_t widest = 0;
  for (int64_t e = 1; e < a.adapters; ++e) {
    const int64_t m = start[static_cast<size_t>(e) + 1] - start[static_cast<size_t>(e)];
    if (m > 0) used.push_back(e), widest = std::max(widest, m);
  }
  auto run = [&](ThreadPool& p, int64_t e) {
    const int64_t at = start[static_cast<size_t>(e)], m = start[static_cast<size_t>(e) + 1] - at;
    adapter_rows(p, a, e, picked + at, m, xs + at * in, ax + at * r, bax + at * out);
  };
  if (widest * (in + out) * r > kInlineMacs) {  // products worth the pool: one adapter after another
    for (int64_t e : used) run(pool, e);
    return;
  }
  // A decode's few rows an adapter: the adapters side by side, each on one thread.
  pool.parallel_for(static_cast<int64_t>(used.size()), [&](int64_t begin, int64_t end) {
    thread_local ThreadPool alone(1);
    for (int64_t i = begin; i < end; ++i) run(alone, used[static_cast<size_t>(i)]);
  });
}

}  // namespace kvf::exec::cpu
