// attention_prefill / attention_masked against a direct double loop: MHA, GQA, MQA,
// Dv != Dk, ALiBi, softcap, sliding window, causal; f64 mode to 1e-12, f32 mode to 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/ops.h"
#include "testing.h"

namespace kvf {
namespace {

using eval::Buffer;
using ir::Builder;
using ir::V;
namespace ops = ir::ops;
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class MaskKind { kNone, kCausal, kWindow, kAlibiCausal };

struct Case {
  const char* name;
  int64_t batch, hq, hkv, t, l, dk, dv;
  MaskKind mask;
  double softcap = 0;
  int64_t window = 0;
};

// Query t sits at absolute position l - t_count + t, so the last query sees every key.
std::vector<int32_t> positions(const Case& c) {
  std::vector<int32_t> pos;
  for (int64_t i = 0; i < c.t; ++i) pos.push_back(static_cast<int32_t>(c.l - c.t + i));
  return pos;
}

double mask_value(const Case& c, const std::vector<float>& slopes, int64_t h, int32_t pos, int64_t j) {
  switch (c.mask) {
    case MaskKind::kNone: return 0;
    case MaskKind::kCausal: return j <= pos ? 0 : -kInf;
    case MaskKind::kWindow: return (j <= pos && j > pos - c.window) ? 0 : -kInf;
    case MaskKind::kAlibiCausal: return (j <= pos ? 0 : -kInf) + static_cast<double>(slopes[h]) * static_cast<double>(j);
  }
  return 0;
}

// The textbook definition, one (batch, head, query) row at a time.
std::vector<double> reference(const Case& c, const Buffer& q, const Buffer& k, const Buffer& v) {
  const std::vector<int32_t> pos = positions(c);
  const std::vector<float> slopes = ops::alibi_slopes(c.hq);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
  const int64_t n_rep = c.hq / c.hkv;
  std::vector<double> out(static_cast<size_t>(c.batch * c.hq * c.t * c.dv), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.t; ++i) {
        const int64_t g = h / n_rep;
        std::vector<double> s(static_cast<size_t>(c.l));
        double m = -kInf;
        for (int64_t j = 0; j < c.l; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.dk; ++d) {
            dot += q.data[((b * c.hq + h) * c.t + i) * c.dk + d] * k.data[((b * c.hkv + g) * c.l + j) * c.dk + d];
          }
          double x = dot * scale;
          if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
          x += mask_value(c, slopes, h, pos[i], j);
          s[j] = x;
          m = std::max(m, x);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - m));
        for (int64_t j = 0; j < c.l; ++j) {
          for (int64_t d = 0; d < c.dv; ++d) {
            out[((b * c.hq + h) * c.t + i) * c.dv + d] += s[j] / sum * v.data[((b * c.hkv + g) * c.l + j) * c.dv + d];
          }
        }
      }
  return out;
}

V build_mask(Builder& b, const Case& c, V pos) {
  switch (c.mask) {
    case MaskKind::kNone: return V{};
    case MaskKind::kCausal: return ops::causal_mask(pos, c.l);
    case MaskKind::kWindow: return ops::sliding_window_mask(pos, c.l, c.window);
    case MaskKind::kAlibiCausal: return ops::causal_mask(pos, c.l) + ops::alibi_bias(b, ops::alibi_slopes(c.hq), c.l);
  }
  return V{};
}

// Each case's random q [B, Hq, T, Dk], k [B, Hkv, L, Dk] and v [B, Hkv, L, Dv].
class AttentionPrefill : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    q = testing::random_buffer(rng, {c.batch, c.hq, c.t, c.dk});
    k = testing::random_buffer(rng, {c.batch, c.hkv, c.l, c.dk});
    v = testing::random_buffer(rng, {c.batch, c.hkv, c.l, c.dv});
  }
  uint64_t seed = testing::test_seed();
  std::mt19937_64 rng{seed};
  Buffer q, k, v;
};

TEST_P(AttentionPrefill, MatchesDirectLoop) {
  const Case& c = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  Result<Buffer> pos = Buffer::i32({c.t}, positions(c));
  ASSERT_TRUE(pos.ok());
  const std::vector<double> want = reference(c, q, k, v);
  const ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(c.dk)), .softcap = c.softcap};
  auto expr = [&](Builder& b) {
    V mask = build_mask(b, c, testing::input(b, "pos", *pos));
    return ops::attention_prefill(testing::input(b, "q", q), testing::input(b, "k", k), testing::input(b, "v", v), mask, opts);
  };
  Result<Buffer> exact = testing::eval_expr(expr, eval::Precision::kF64);
  ASSERT_TRUE(exact.ok()) << exact.error().to_string();
  EXPECT_EQ(exact->shape, (Shape{c.batch, c.hq, c.t, c.dv}));
  EXPECT_LE(testing::rel_error(exact->data, want), 1e-12);
  Result<Buffer> f32 = testing::eval_expr(expr, eval::Precision::kNative);
  ASSERT_TRUE(f32.ok()) << f32.error().to_string();
  EXPECT_LE(testing::rel_error(f32->data, want), 1e-6);
}

// The same cases through attention_masked: the first L - T keys already sit in the state
// caches, the step's T new keys are written at pos[0] = L - T by DynamicUpdateSlice, and the
// chain attends over the whole cache.
TEST_P(AttentionPrefill, ThroughTheCacheMatchesDirectLoop) {
  const Case& c = GetParam();
  SCOPED_TRACE(str_cat("seed ", seed));
  // Split the full K/V into the cached prefix (in state) and the step's new rows.
  auto rows = [&](const Buffer& x, int64_t from, int64_t to, int64_t d) {
    Buffer out = testing::must(Buffer::zeros(DType::kF32, {c.batch, c.hkv, to - from, d}));
    for (int64_t b = 0; b < c.batch * c.hkv; ++b)
      for (int64_t j = from; j < to; ++j)
        for (int64_t e = 0; e < d; ++e) out.data[(b * (to - from) + j - from) * d + e] = x.data[(b * c.l + j) * d + e];
    return out;
  };
  Builder b("cached");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {c.t});
  V kc = b.state("k_cache", DType::kF32, {c.batch, c.hkv, c.l, c.dk}, ir::StateRole::kKeyCache, 0);
  V vc = b.state("v_cache", DType::kF32, {c.batch, c.hkv, c.l, c.dv}, ir::StateRole::kValueCache, 0);
  const ops::AttnOpts opts{.scale = 1.0 / std::sqrt(static_cast<double>(c.dk)), .softcap = c.softcap};
  V mask = build_mask(b, c, pos);
  auto r = ops::attention_masked(testing::input(b, "q", q), testing::input(b, "k_new", rows(k, c.l - c.t, c.l, c.dk)),
                                 testing::input(b, "v_new", rows(v, c.l - c.t, c.l, c.dv)), kc, vc, pos, mask, opts);
  b.output("out", r.out);
  const ir::Graph g = testing::must(b.finish());
  eval::StateStore state;
  state["k_cache"] = k;  // prefix rows are the real keys; the new rows' slots hold stale
  state["v_cache"] = v;  // copies that the write must replace (checked by the reference)
  for (int64_t bh = 0; bh < c.batch * c.hkv; ++bh)
    for (int64_t j = c.l - c.t; j < c.l; ++j) {
      for (int64_t e = 0; e < c.dk; ++e) state["k_cache"].data[(bh * c.l + j) * c.dk + e] = 7.0;
      for (int64_t e = 0; e < c.dv; ++e) state["v_cache"].data[(bh * c.l + j) * c.dv + e] = -7.0;
    }
  eval::Oracle oracle({.precision = eval::Precision::kF64, .threads = 1});
  Result<eval::Outputs> out = oracle.run(g, {{ir::Slot::kPos, testing::must(Buffer::i32({c.t}, positions(c)))}}, state);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_LE(testing::rel_error(out->at("out").data, reference(c, q, k, v)), 1e-12);
  EXPECT_EQ(state.at("k_cache").data, k.data);  // the donated cache now holds every key
}

INSTANTIATE_TEST_SUITE_P(
    Forms, AttentionPrefill,
    ::testing::Values(Case{"mha", 2, 4, 4, 3, 7, 8, 8, MaskKind::kCausal},
                      Case{"gqa2", 2, 4, 2, 3, 7, 8, 8, MaskKind::kCausal},
                      Case{"gqa4", 1, 8, 2, 4, 9, 8, 8, MaskKind::kCausal},
                      Case{"gqa8", 1, 16, 2, 2, 6, 4, 4, MaskKind::kCausal},
                      Case{"mqa", 2, 4, 1, 3, 7, 8, 8, MaskKind::kCausal},
                      Case{"dv_ne_dk", 1, 4, 2, 3, 7, 8, 12, MaskKind::kCausal},
                      Case{"no_mask", 1, 2, 2, 3, 5, 8, 8, MaskKind::kNone},
                      Case{"alibi", 2, 6, 6, 3, 7, 8, 8, MaskKind::kAlibiCausal},
                      Case{"softcap", 1, 4, 2, 3, 7, 8, 8, MaskKind::kCausal, 0.5},
                      Case{"window", 1, 4, 2, 5, 11, 8, 8, MaskKind::kWindow, 0, 3},
                      Case{"decode_row", 1, 8, 1, 1, 13, 16, 8, MaskKind::kCausal}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(AttentionChain, RepeatKvIsReshapeBroadcastReshape) {
  Builder b("repeat");
  V x = b.constant("x", testing::must(HostTensor::zeros(DType::kF32, {1, 2, 5, 4})));
  V r = ops::repeat_kv(x, 4);
  EXPECT_EQ(r.shape(), (Shape{1, 8, 5, 4}));
  ASSERT_EQ(b.graph().eqns.size(), 3u);
  EXPECT_EQ(b.graph().eqns[0].op, ir::OpKind::kReshape);
  EXPECT_EQ(b.graph().eqns[1].op, ir::OpKind::kBroadcast);
  EXPECT_EQ(b.graph().eqns[2].op, ir::OpKind::kReshape);
  EXPECT_EQ(ops::repeat_kv(x, 1).id, x.id);  // n_rep 1 emits nothing
}

TEST(AttentionChain, HeadsNotAMultipleIsATypedError) {
  Builder b("bad_gqa");
  V q = b.constant("q", testing::must(HostTensor::zeros(DType::kF32, {1, 6, 1, 4})));
  V k = b.constant("k", testing::must(HostTensor::zeros(DType::kF32, {1, 4, 3, 4})));
  V v = b.constant("v", testing::must(HostTensor::zeros(DType::kF32, {1, 4, 3, 4})));
  ops::attention_prefill(q, k, v, V{}, {});
  Result<ir::Graph> g = b.finish();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), ErrorCode::kInvalidInput);
  EXPECT_NE(g.error().message().find("6 query heads"), std::string::npos) << g.error().message();
}

// attention_masked writes the new rows into the donated cache at pos and attends over it.
TEST(AttentionMasked, WritesCacheAtPosAndAttendsOverIt) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const int64_t cap = 10, t = 2, hq = 4, hkv = 2, d = 8, start = 5;
  Builder b("cached");
  V pos = b.slot(ir::Slot::kPos, DType::kI32, {t});
  V kc = b.state("k_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kKeyCache, 0);
  V vc = b.state("v_cache", DType::kF32, {1, hkv, cap, d}, ir::StateRole::kValueCache, 0);
  const Buffer q = testing::random_buffer(rng, {1, hq, t, d});
  const Buffer kn = testing::random_buffer(rng, {1, hkv, t, d});
  const Buffer vn = testing::random_buffer(rng, {1, hkv, t, d});
  const ops::AttnOpts opts{.scale = 1.0 / std::sqrt(8.0), .softcap = 0};
  auto r = ops::attention_masked(testing::input(b, "q", q), testing::input(b, "kn", kn), testing::input(b, "vn", vn),
                                 kc, vc, pos, ops::causal_mask(pos, cap), opts);
  b.output("out", r.out);
  Result<ir::Graph> g = b.finish();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  ASSERT_EQ(g->donations.size(), 2u);

  // Earlier tokens already in the cache; rows past pos hold garbage the mask must hide.
  eval::StateStore state;
  state["k_cache"] = testing::random_buffer(rng, {1, hkv, cap, d});
  state["v_cache"] = testing::random_buffer(rng, {1, hkv, cap, d}, -5, 5);
  Buffer k_all = state["k_cache"], v_all = state["v_cache"];
  for (int64_t g2 = 0; g2 < hkv; ++g2)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t x = 0; x < d; ++x) {
        k_all.data[(g2 * cap + start + i) * d + x] = kn.data[(g2 * t + i) * d + x];
        v_all.data[(g2 * cap + start + i) * d + x] = vn.data[(g2 * t + i) * d + x];
      }
  eval::Oracle oracle({.precision = eval::Precision::kF64, .threads = 1});
  Result<Buffer> pos_buf = Buffer::i32({t}, {start, start + 1});
  ASSERT_TRUE(pos_buf.ok());
  Result<eval::Outputs> out = oracle.run(*g, {{ir::Slot::kPos, *pos_buf}}, state);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(state["k_cache"].data, k_all.data);  // published in place of the old cache
  EXPECT_EQ(state["v_cache"].data, v_all.data);

  const Case c{"cached", 1, hq, hkv, t, start + t, d, d, MaskKind::kCausal};
  Buffer k_live = testing::must(Buffer::zeros(DType::kF32, {1, hkv, start + t, d}));
  Buffer v_live = k_live;
  for (int64_t g2 = 0; g2 < hkv; ++g2)
    for (int64_t j = 0; j < start + t; ++j)
      for (int64_t x = 0; x < d; ++x) {
        k_live.data[(g2 * (start + t) + j) * d + x] = k_all.data[(g2 * cap + j) * d + x];
        v_live.data[(g2 * (start + t) + j) * d + x] = v_all.data[(g2 * cap + j) * d + x];
      }
  EXPECT_LE(testing::rel_error(out->at("out").data, reference(c, q, k_live, v_live)), 1e-12);
}

TEST(Softmax, StableAtLargeMagnitudes) {
  const std::vector<double> x{1e4, 1e4 - 1, -1e4, 0, 1e4 - 2, -1e4 + 1};
  Result<Buffer> in = Buffer::of(DType::kF32, {1, 6}, x);
  ASSERT_TRUE(in.ok());
  Result<Buffer> out = testing::eval_expr([&](Builder& b) { return ops::softmax(testing::input(b, "x", *in)); },
                                          eval::Precision::kNative);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  const std::vector<double> want{1 / z, std::exp(-1.0) / z, 0, 0, std::exp(-2.0) / z, 0};
  for (double p : out->data) EXPECT_TRUE(std::isfinite(p));
  EXPECT_LE(testing::max_abs_diff(out->data, want), 1e-7);
  EXPECT_LE(testing::rel_error(out->data, want), 1e-6);
}

}  // namespace
}  // namespace kvf
