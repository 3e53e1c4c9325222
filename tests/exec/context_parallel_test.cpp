// Context parallelism on the CPU: partial attention over each rank's keys and the
// log-sum-exp merge (exec/cpu/attention_merge.h), and the backend built on them
// (exec/context_parallel.h), each against the single-device CPU kernel (exec/cpu/attention.h)
// on fresh random inputs; and the ring prefill schedule (plan/kv_shards.h) run through the
// same partials and merge, by hand and by the backend, against the kernel's causal prefill.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "core/thread_pool.h"
#include "exec/context_parallel.h"
#include "exec/cpu/attention_merge.h"
#include "plan/kv_shards.h"
#include "testing.h"

namespace kvf::exec {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Case {
  int64_t batch = 1, hq = 4, hkv = 2, lq = 1, lk = 16, dk = 32, dv = 32;
  DType kv = DType::kF32;
  bool paged = false;      // K/V pools [pool_rows, hkv, d] read through a shuffled read map
  bool mask = false;       // lq = 1: a random additive mask, some keys -inf; lq > 1: causal
  float softcap = 0.0f;
  std::vector<int32_t> len;  // live lengths [batch], or none
};

// A case's random operands (f16 caches hold the rounded bits) and the kernel's view of them.
struct Inputs {
  std::vector<float> q, k, v, mask;
  std::vector<uint16_t> k16, v16;
  std::vector<int32_t> len, read;
  AttentionArgs args;
};

std::vector<float> draw(std::mt19937_64& rng, int64_t n, float spread) {
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = d(rng);
  return x;
}

const void* cache_of(DType kv, const std::vector<float>& f32, std::vector<uint16_t>& f16) {
  if (kv == DType::kF32) return f32.data();
  f16.resize(f32.size());
  std::transform(f32.begin(), f32.end(), f16.begin(), f32_to_f16_bits);
  return f16.data();
}

std::vector<float> make_mask(const Case& c, std::mt19937_64& rng) {
  std::vector<float> m(static_cast<size_t>(c.lq * c.lk), 0.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int64_t i = 0; i < c.lq; ++i) {
    for (int64_t t = 0; t < c.lk; ++t) {
      float& x = m[static_cast<size_t>(i * c.lk + t)];
      if (c.lq > 1) x = t <= i ? 0.0f : kNegInf;  // a prefill from position 0
      else x = u(rng) < 0.25f ? kNegInf : u(rng) - 0.5f;
    }
  }
  return m;
}

Inputs make_inputs(const Case& c, std::mt19937_64& rng) {
  Inputs in;
  // Rows of keys the cache holds: dense [batch, hkv, lk, d], or a pool with spare rows.
  const int64_t rows = c.paged ? c.batch * c.lk + 7 : c.batch * c.lk;
  in.q = draw(rng, c.batch * c.hq * c.lq * c.dk, 1.0f);
  in.k = draw(rng, rows * c.hkv * c.dk, 1.0f);
  in.v = draw(rng, rows * c.hkv * c.dv, 1.0f);
  in.len = c.len;
  AttentionArgs& a = in.args;
  a.batch = c.batch, a.hq = c.hq, a.hkv = c.hkv, a.lq = c.lq, a.lk = c.lk, a.dk = c.dk, a.dv = c.dv;
  a.q = in.q.data();
  a.kv_dtype = c.kv;
  a.k = cache_of(c.kv, in.k, in.k16);
  a.v = cache_of(c.kv, in.v, in.v16);
  if (c.paged) {
    in.read.resize(static_cast<size_t>(rows));
    std::iota(in.read.begin(), in.read.end(), 0);
    std::shuffle(in.read.begin(), in.read.end(), rng);
    in.read.resize(static_cast<size_t>(c.batch * c.lk));
    a.read = in.read.data();
    a.pool_rows = rows;
  }
  if (c.mask) {
    in.mask = make_mask(c, rng);
    a.mask = in.mask.data();
  }
  a.len = in.len.empty() ? nullptr : in.len.data();
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.dk)));
  a.softcap = c.softcap;
  return in;
}

// The single-device answer: the CPU kernel, streaming schedule.
std::vector<float> kernel_out(AttentionArgs a) {
  std::vector<float> out(static_cast<size_t>(a.batch * a.hq * a.lq * a.dv), std::nanf(""));
  a.out = out.data();
  Status s = cpu::attention_check(a, {});
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  if (!s) return out;
  ThreadPool pool(1);
  cpu::attention(pool, a, {}, nullptr);
  return out;
}

// ‖got − want‖ / ‖want‖ over the rows where want is a number; NaN rows must be NaN in both.
double compare(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  std::vector<double> g, w;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << "element " << i;
    if (std::isnan(want[i]) || std::isnan(got[i])) continue;
    g.push_back(got[i]);
    w.push_back(want[i]);
  }
  return w.empty() ? 0.0 : testing::rel_error(g, w);
}

// Decode row 0 of every head the way R ranks would: each over its own keys, then merged.
std::vector<float> sharded_decode(const AttentionArgs& a, int64_t n, int ranks) {
  const plan::KvShards shards = testing::must(plan::KvShards::create(ranks, 16));
  std::vector<float> out(static_cast<size_t>(a.hq * a.dv)), o(static_cast<size_t>(ranks * a.dv));
  std::vector<float> lse(static_cast<size_t>(ranks));
  for (int64_t h = 0; h < a.hq; ++h) {
    for (int r = 0; r < ranks; ++r) {
      lse[static_cast<size_t>(r)] = cpu::partial_attention(a, 0, h, 0, shards.positions(r, n), o.data() + r * a.dv);
    }
    cpu::merge_partials(ranks, a.dv, o.data(), lse.data(), out.data() + h * a.dv);
  }
  return out;
}

// The f64 partials against the kernel's f32 online softmax: over seeds 1-200 the worst
// relative error of a run (every length, ranks and cache type) has median 4.8e-7 and
// maximum 6e-7; f16 caches alike (both sides read the same rounded values).
TEST(AttentionMerge, ShardedDecodeEqualsTheKernel) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (DType kv : {DType::kF32, DType::kF16}) {
    for (int64_t n : {0, 1, 15, 16, 17, 100, 1000}) {
      Case c{.lk = std::max<int64_t>(n, 1), .kv = kv, .len = {static_cast<int32_t>(n)}};
      Inputs in = make_inputs(c, rng);
      const std::vector<float> want = kernel_out(in.args);
      for (int ranks = 1; ranks <= 4; ++ranks) {
        const std::vector<float> got = sharded_decode(in.args, n, ranks);
        if (n == 0) {  // no key: zeros on both sides, which no relative error could tell
          EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return x == 0.0f; })) << ranks << " ranks";
          EXPECT_TRUE(std::all_of(want.begin(), want.end(), [](float x) { return x == 0.0f; })) << "the kernel";
          continue;
        }
        const double err = compare(got, want);
        EXPECT_LE(err, 1e-5) << dtype_name(kv) << " keys " << n << " ranks " << ranks << " seed " << seed;
        worst = std::max(worst, err);
      }
    }
  }
  ::testing::Test::RecordProperty("worst_rel", str_cat(worst));
}

TEST(AttentionMerge, EmptyPartsAddNothingAndAllEmptyIsZeros) {
  const float o[] = {1, 2, std::nanf(""), 7, 3, 4};  // part 1 is empty: its o is never read
  const float lse[] = {0.5f, kNegInf, 0.5f};
  float out[2];
  const float merged = cpu::merge_partials(3, 2, o, lse, out);
  EXPECT_FLOAT_EQ(out[0], 2.0f);
  EXPECT_FLOAT_EQ(out[1], 3.0f);
  EXPECT_FLOAT_EQ(merged, 0.5f + std::log(2.0f));
  const float none[] = {kNegInf, kNegInf};
  const float merged_none = cpu::merge_partials(2, 2, o, none, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(merged_none, kNegInf);
}

// The merged lse is the lse over the union of the parts' keys: merges compose (a tree).
TEST(AttentionMerge, MergedLseIsTheLseOfAllKeys) {
  std::mt19937_64 rng(testing::test_seed());
  Inputs in = make_inputs({.lk = 100}, rng);
  std::vector<int64_t> all(100), even, odd;
  std::iota(all.begin(), all.end(), 0);
  for (int64_t t : all) (t % 2 ? odd : even).push_back(t);
  std::vector<float> o(64), whole(32), merged(32);
  const float lse[] = {cpu::partial_attention(in.args, 0, 1, 0, even, o.data()),
                       cpu::partial_attention(in.args, 0, 1, 0, odd, o.data() + 32)};
  const float lse_all = cpu::partial_attention(in.args, 0, 1, 0, all, whole.data());
  EXPECT_NEAR(cpu::merge_partials(2, 32, o.data(), lse, merged.data()), lse_all, 1e-5);
  std::vector<double> a(merged.begin(), merged.end()), b(whole.begin(), whole.end());
  EXPECT_LE(testing::rel_error(a, b), 1e-6);
}

struct BackendCase {
  const char* name;
  Case c;
  int ranks;
};

class ContextParallelBackend : public ::testing::TestWithParam<BackendCase> {};

// Over seeds 1-200 the worst case's relative error is 4.9e-7 (gqa_f32; the others <= 3.8e-7).
TEST_P(ContextParallelBackend, EqualsTheKernel) {
  const BackendCase& p = GetParam();
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  Inputs in = make_inputs(p.c, rng);
  const std::vector<float> want = kernel_out(in.args);
  auto cp = testing::must(ContextParallelAttention::create(p.ranks, 16));
  std::vector<float> got(want.size(), std::nanf(""));
  AttentionArgs a = in.args;
  a.out = got.data();
  Status s = cp->run(a, 0);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const double err = compare(got, want);
  EXPECT_LE(err, 1e-5) << "seed " << seed;
  ::testing::Test::RecordProperty("rel", str_cat(err));
  int64_t visible = 0;
  for (int64_t b = 0; b < p.c.batch; ++b) visible += p.c.len.empty() ? p.c.lk : std::clamp<int64_t>(p.c.len[b], 0, p.c.lk);
  const std::vector<int64_t>& keys = cp->stats().keys;
  EXPECT_EQ(std::accumulate(keys.begin(), keys.end(), int64_t{0}), visible) << "each visible key on one rank";
  EXPECT_EQ(cp->stats().rows, p.c.batch);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ContextParallelBackend,
    ::testing::Values(BackendCase{"gqa_f32", {.hq = 8, .hkv = 2, .lk = 333}, 3},
                      BackendCase{"mqa_f16", {.hq = 6, .hkv = 1, .lk = 200, .kv = DType::kF16}, 4},
                      BackendCase{"live_lengths", {.batch = 3, .lk = 300, .len = {300, 1, 77}}, 2},
                      BackendCase{"len_zero_is_zeros", {.batch = 2, .lk = 40, .len = {0, 40}}, 2},
                      BackendCase{"paged", {.batch = 2, .lk = 96, .paged = true, .len = {96, 50}}, 4},
                      BackendCase{"paged_f16", {.batch = 2, .lk = 64, .kv = DType::kF16, .paged = true}, 3},
                      BackendCase{"mask_softcap", {.lk = 150, .mask = true, .softcap = 5.0f}, 2},
                      BackendCase{"value_width_differs", {.lk = 70, .dk = 48, .dv = 16}, 3},
                      BackendCase{"one_rank", {.lk = 50}, 1}),
    [](const ::testing::TestParamInfo<BackendCase>& info) { return std::string(info.param.name); });

TEST(ContextParallelBackendRefuses, Bf16CachesAndBadRanks) {
  auto cp = testing::must(ContextParallelAttention::create(2, 16));
  const plan::AttentionRequest base{.batch = 1, .hq = 8, .hkv = 2, .lq = 1, .lk = 64, .dk = 16, .dv = 16};
  EXPECT_TRUE(cp->check(base, 0).ok());
  plan::AttentionRequest r = base;
  r.lq = 5;
  EXPECT_TRUE(cp->check(r, 0).ok()) << "a chunk runs the ring";
  r = base;
  r.kv_dtype = DType::kBF16;
  Status bf16 = cp->check(r, 0);
  ASSERT_FALSE(bf16.ok());
  EXPECT_THAT(bf16.error().message(), ::testing::HasSubstr("bf16 KV cache"));
  Result<std::unique_ptr<ContextParallelAttention>> none = ContextParallelAttention::create(0, 16);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kInvalidInput);
}

// A causal prefill of n positions the ring's way: every rank, at every step, computes its
// query blocks against the key blocks it holds then (plan::ring_pairs); each query row's
// partials, one per pair, merge into the kernel's causal prefill.
TEST(RingPrefill, PartialsOverTheScheduleMergeToTheKernel) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t n : {1, 16, 50, 130}) {
      Inputs in = make_inputs({.hq = 4, .hkv = 2, .lq = n, .lk = n, .dk = 16, .dv = 16, .mask = true}, rng);
      const AttentionArgs& a = in.args;
      const std::vector<float> want = kernel_out(a);
      const plan::KvShards shards = testing::must(plan::KvShards::create(ranks, 16));
      // Per query row, per head: the partials of every pair that covers it.
      std::vector<std::vector<float>> o(static_cast<size_t>(n * a.hq)), lse(static_cast<size_t>(n * a.hq));
      for (int r = 0; r < ranks; ++r) {
        for (int step = 0; step < ranks; ++step) {
          for (const plan::BlockPair& p : plan::ring_pairs(shards, n, r, step)) {
            std::vector<int64_t> keys;
            for (int64_t t = p.key * 16; t < std::min(n, p.key * 16 + 16); ++t) keys.push_back(t);
            for (int64_t i = p.query * 16; i < std::min(n, p.query * 16 + 16); ++i) {
              for (int64_t h = 0; h < a.hq; ++h) {
                std::vector<float>& to = o[static_cast<size_t>(i * a.hq + h)];
                to.resize(to.size() + static_cast<size_t>(a.dv));
                lse[static_cast<size_t>(i * a.hq + h)].push_back(
                    cpu::partial_attention(a, 0, h, i, keys, to.data() + to.size() - a.dv));
              }
            }
          }
        }
      }
      std::vector<float> got(want.size());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t h = 0; h < a.hq; ++h) {
          const size_t at = static_cast<size_t>(i * a.hq + h);
          ASSERT_EQ(static_cast<int64_t>(lse[at].size()), i / 16 + 1) << "one partial per visible key block";
          cpu::merge_partials(static_cast<int64_t>(lse[at].size()), a.dv, o[at].data(), lse[at].data(),
                              got.data() + (h * n + i) * a.dv);
        }
      }
      EXPECT_LE(compare(got, want), 1e-5) << "ranks " << ranks << " n " << n << " seed " << seed;
    }
  }
}

// The backend's ring over a causal prefill: the kernel's answer, and only the pairs the causal
// mask leaves (nb (nb + 1) / 2 of nb² for nb key blocks), each block's keys once per pair.
TEST(RingPrefill, TheBackendEqualsTheKernelAndSkipsTheFuture) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  for (int ranks : {1, 2, 3, 4}) {
    for (int64_t n : {2, 16, 50, 130}) {  // more than one query row: the ring, not the decode split
      Inputs in = make_inputs({.hq = 4, .hkv = 2, .lq = n, .lk = n, .dk = 16, .dv = 16, .mask = true}, rng);
      const std::vector<float> want = kernel_out(in.args);
      auto cp = testing::must(ContextParallelAttention::create(ranks, 16));
      std::vector<float> got(want.size(), std::nanf(""));
      AttentionArgs a = in.args;
      a.out = got.data();
      ASSERT_TRUE(cp->run(a, 0).ok());
      EXPECT_LE(compare(got, want), 1e-5) << "ranks " << ranks << " n " << n << " seed " << seed;
      const int64_t nb = (n + 15) / 16;
      EXPECT_EQ(cp->stats().pairs, nb * (nb + 1) / 2) << "ranks " << ranks << " n " << n;
      int64_t keys = 0;  // block k's keys, once for each query block q >= k
      for (int64_t k = 0; k < nb; ++k) keys += (nb - k) * (std::min(n, 16 * k + 16) - 16 * k);
      const std::vector<int64_t>& held = cp->stats().keys;
      EXPECT_EQ(std::accumulate(held.begin(), held.end(), int64_t{0}), keys);
    }
  }
}

}  // namespace
}  // namespace kvf::exec
