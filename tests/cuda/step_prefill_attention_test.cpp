// The step executor's form of the tensor-core prefill (exec/cuda/attention.h,
// step_prefill_attention) against an f64 attention on the host: q and out f32 in the step's
// [B, Hq, Lq, d] layout, K/V a dense 16-bit cache [B, Hkv, cap, d] whose dead keys (t >=
// lens[b]) hold NaN, causality from each query row's position. Positions are the chunk's
// consecutive ones, or shuffled, repeated, negative (the row sees no key) and past the live
// length. Outputs are NaN before the run; every element is checked (finite, ‖Δ‖/‖ref‖ <= 1e-2:
// q and the probabilities are rounded to 16 bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exec/cuda/attention.h"
#include "gpu_testing.h"

namespace kvf::exec::cuda {
namespace {

using namespace kvf::testing;

enum class Positions { kChunk, kScrambled };

struct StepCase {
  KvType type = KvType::kF16;
  int hq = 4, hkv = 2, d = 64, lq = 70, cap = 200;
  std::vector<int> lens = {200, 131};
  Positions positions = Positions::kChunk;
  float softcap = 0.0f;
  std::string name() const {
    std::string s = std::string(type == KvType::kBF16 ? "bf16" : "f16") + " Hq" + std::to_string(hq) + "/" +
                    std::to_string(hkv) + " d" + std::to_string(d) + " lq " + std::to_string(lq) + " cap " +
                    std::to_string(cap) + " lens";
    for (int l : lens) s += " " + std::to_string(l);
    if (positions == Positions::kScrambled) s += " scrambled";
    if (softcap > 0) s += " softcap";
    return s;
  }
};

// Row i of sequence b: the chunk's own position (the last lq of its live keys), or any
// position in [-2, lens + 3) in any order, repeats allowed.
std::vector<int32_t> positions_of(const StepCase& c, std::mt19937_64& rng) {
  std::vector<int32_t> pos;
  for (int b = 0; b < static_cast<int>(c.lens.size()); ++b) {
    std::uniform_int_distribution<int> any(-2, c.lens[b] + 2);
    for (int i = 0; i < c.lq; ++i) {
      pos.push_back(c.positions == Positions::kChunk ? c.lens[b] - c.lq + i : any(rng));
    }
  }
  return pos;
}

void run_step_case(const StepCase& c, uint64_t sd) {
  SCOPED_TRACE(c.name() + " seed " + std::to_string(sd));
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int batch = static_cast<int>(c.lens.size()), d = c.d, n_rep = c.hq / c.hkv;
  auto round16 = [&](float x) { return c.type == KvType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x); };
  auto widen16 = [&](uint16_t b) { return c.type == KvType::kBF16 ? bf16_to_f32(b) : f16_to_f32(b); };
  std::vector<float> q(static_cast<size_t>(batch) * c.hq * c.lq * d);
  for (float& x : q) x = 3.0f * uni(rng);
  const size_t cache = static_cast<size_t>(batch) * c.hkv * c.cap * d;
  std::vector<uint16_t> k(cache), v(cache);
  auto at_kv = [&](int b, int g, int t) { return ((static_cast<size_t>(b) * c.hkv + g) * c.cap + t) * d; };
  for (int b = 0; b < batch; ++b)
    for (int g = 0; g < c.hkv; ++g)
      for (int t = 0; t < c.cap; ++t)
        for (int e = 0; e < d; ++e) {
          const bool live = t < c.lens[b];
          k[at_kv(b, g, t) + e] = live ? round16(uni(rng)) : kNaN16;
          v[at_kv(b, g, t) + e] = live ? round16(uni(rng)) : kNaN16;
        }
  const std::vector<int32_t> pos = positions_of(c, rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  // f64 reference over the f32 q: row i of sequence b sees keys t < min(lens, cap), t <= pos.
  std::vector<double> ref(q.size(), 0.0), s, acc(d);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < c.hq; ++h)
      for (int i = 0; i < c.lq; ++i) {
        const int g = h / n_rep;
        const int last = std::min(std::min(c.lens[b], c.cap) - 1, pos[static_cast<size_t>(b * c.lq + i)]);
        if (last < 0) continue;
        const float* qr = &q[((static_cast<size_t>(b) * c.hq + h) * c.lq + i) * d];
        s.assign(static_cast<size_t>(last) + 1, 0.0);
        double mx = -INFINITY;
        for (int t = 0; t <= last; ++t) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += static_cast<double>(qr[e]) * widen16(k[at_kv(b, g, t) + e]);
          double x = dot * scale;
          if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
          s[static_cast<size_t>(t)] = x;
          mx = std::max(mx, x);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int t = 0; t <= last; ++t) {
          const double p = std::exp(s[static_cast<size_t>(t)] - mx);
          l += p;
          for (int e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += p * widen16(v[at_kv(b, g, t) + e]);
        }
        double* o = &ref[((static_cast<size_t>(b) * c.hq + h) * c.lq + i) * d];
        for (int e = 0; e < d; ++e) o[e] = acc[static_cast<size_t>(e)] / l;
      }

  DevBuf<float> dq, dout;
  DevBuf<uint16_t> dk, dv;
  DevBuf<int32_t> dlens, dpos;
  KVF_CUDA_CHECK(upload(dq, q));
  KVF_CUDA_CHECK(upload(dout, std::vector<float>(q.size(), NAN)));
  KVF_CUDA_CHECK(upload(dk, k));
  KVF_CUDA_CHECK(upload(dv, v));
  KVF_CUDA_CHECK(upload(dlens, c.lens));
  KVF_CUDA_CHECK(upload(dpos, pos));

  StepPrefillArgs a;
  a.kv_type = c.type;
  a.batch = batch;
  a.q_heads = c.hq;
  a.kv_heads = c.hkv;
  a.head_dim = d;
  a.lq = c.lq;
  a.cap = c.cap;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.out = dout.p;
  a.lens = dlens.p;
  a.pos = dpos.p;
  a.scale = scale;
  a.softcap = c.softcap;
  Status st = check_step_prefill_attention(a);
  ASSERT_TRUE(st.ok()) << st.error().message();
  st = step_prefill_attention(a);
  ASSERT_TRUE(st.ok()) << st.error().message();
  KVF_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(q.size());
  KVF_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, out.size() * 4, cudaMemcpyDeviceToHost));

  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      if (bad++ < 3) ADD_FAILURE() << "output " << i << " not finite (unwritten, or a dead key read)";
      continue;
    }
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  ASSERT_EQ(bad, 0u) << bad << " of " << out.size() << " outputs not finite";
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, 1e-2);
  worst_error().add(rel);
}

class CudaStepPrefill : public ::testing::Test {
 protected:
  void SetUp() override {
    worst_error() = {};
    sd_ = test_seed();
  }
  void TearDown() override { worst_error().print_and_reset(); }
  void run(const StepCase& c) { run_step_case(c, sd_ + static_cast<uint64_t>(worst_error().cases) * 7919); }
  uint64_t sd_ = 0;
};

TEST_F(CudaStepPrefill, EveryHeadDimAChunkOverItsCache) {
  KVF_NEED_GPU();
  for (int d : {64, 128, 256})
    for (KvType t : {KvType::kF16, KvType::kBF16}) {
      StepCase c;
      c.d = d;
      c.type = t;
      run(c);
      if (HasFatalFailure()) return;
    }
}

// Positions in any order, repeated, before the first key (no key: zeros) and past the live
// length (every live key): the kernel takes each row's position as it is.
TEST_F(CudaStepPrefill, ScrambledPositions) {
  KVF_NEED_GPU();
  for (int d : {64, 128, 256}) {
    StepCase c;
    c.d = d;
    c.positions = Positions::kScrambled;
    c.lq = 97;
    run(c);
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaStepPrefill, GqaGroupsSoftcapAndAWholePrompt) {
  KVF_NEED_GPU();
  StepCase c;
  c.hq = 32;
  c.hkv = 4;
  c.lq = 600;
  c.cap = 700;
  c.lens = {600};  // a whole prompt: the chunk is every live key
  run(c);
  c.hq = 8;
  c.hkv = 8;
  c.d = 256;
  c.softcap = 50.0f;
  c.lq = 129;
  c.cap = 129;
  c.lens = {129, 129};
  run(c);
}

TEST(CudaStepPrefillChecks, RefusesWhatNoKernelRuns) {
  StepPrefillArgs a;
  float x = 0;
  int32_t n = 0;
  a.q = &x;
  a.k = a.v = &x;
  a.out = &x;
  a.lens = a.pos = &n;
  a.lq = a.cap = 1;
  a.head_dim = 96;
  EXPECT_EQ(check_step_prefill_attention(a).error().code(), ErrorCode::kUnsupported);
  a.head_dim = 64;
  a.q_heads = 3;
  a.kv_heads = 2;
  EXPECT_EQ(check_step_prefill_attention(a).error().code(), ErrorCode::kInvalidInput);
  a.q_heads = 2;
  a.pos = nullptr;
  EXPECT_EQ(check_step_prefill_attention(a).error().code(), ErrorCode::kInvalidInput);
  a.pos = &n;
  EXPECT_TRUE(check_step_prefill_attention(a).ok());
}

}  // namespace
}  // namespace kvf::exec::cuda
