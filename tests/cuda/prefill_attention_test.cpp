// The CUDA tensor-core prefill kernel (exec/cuda/attention.h, prefill_attention) against an
// f64 attention on the host, on fresh random inputs: head dims 64/128/256, bf16 and f16,
// causal (bottom-right aligned) and not, variable-length batches (lengths 1, 7, 129, 4097,
// chunked prefill with more keys than queries, empty sequences), GQA groups. Outputs are
// NaN before each run, and every element is checked (finite, ‖Δ‖/‖ref‖ <= 1e-2).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/attention.h"
#include "gpu_testing.h"

namespace kvf::exec::cuda {
namespace {

using namespace kvf::testing;  // gpu_testing.h: 16-bit conversions, DevBuf, worst_error, kNaN16

struct Case {
  KvType type = KvType::kBF16;
  int hq = 4, hkv = 2, d = 128;
  std::vector<int> lq = {1, 7, 129};  // query length per sequence
  std::vector<int> lk = {};           // key length per sequence (empty: = lq)
  bool causal = true;
  float softcap = 0.0f;
  bool alibi = false;
  int window = 0;
  PrefillKernel kernel = PrefillKernel::kMmaSync;  // run_case sets it
  bool mods() const { return softcap > 0.0f || alibi || window > 0; }
  std::string name() const {
    std::string s = std::string(type == KvType::kBF16 ? "bf16" : "f16") + " Hq" + std::to_string(hq) + "/" +
                    std::to_string(hkv) + " d" + std::to_string(d) + (causal ? " causal" : " full") + " lq/lk";
    for (size_t i = 0; i < lq.size(); ++i)
      s += " " + std::to_string(lq[i]) + "/" + std::to_string(lk.empty() ? lq[i] : lk[i]);
    if (softcap > 0) s += " softcap";
    if (alibi) s += " alibi";
    if (window) s += " window" + std::to_string(window);
    return s + (kernel == PrefillKernel::kWgmma ? " wgmma" : " mma.sync");
  }
};

// Whether this device runs the wgmma kernel (sm_90).
bool has_wgmma() {
  PrefillAttentionArgs a;
  a.total_q = a.total_k = 1;
  return prefill_kernel_for(a) == PrefillKernel::kWgmma;
}

void run_case_on(const Case& c, uint64_t sd) {
  SCOPED_TRACE(c.name() + " seed " + std::to_string(sd));
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int batch = static_cast<int>(c.lq.size());
  const std::vector<int> lk = c.lk.empty() ? c.lq : c.lk;
  std::vector<int32_t> cu_q(batch + 1, 0), cu_k(batch + 1, 0);
  for (int b = 0; b < batch; ++b) {
    cu_q[b + 1] = cu_q[b] + c.lq[b];
    cu_k[b + 1] = cu_k[b] + lk[b];
  }
  const int tq = cu_q[batch], tk = cu_k[batch], d = c.d, n_rep = c.hq / c.hkv;
  auto round16 = [&](float x) { return c.type == KvType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x); };
  auto widen16 = [&](uint16_t b) { return c.type == KvType::kBF16 ? bf16_to_f32(b) : f16_to_f32(b); };
  // q [tq, Hq, d] with a spread that makes the softmax peaked; k, v [tk, Hkv, d].
  std::vector<uint16_t> q(static_cast<size_t>(tq) * c.hq * d), k(static_cast<size_t>(tk) * c.hkv * d),
      v(static_cast<size_t>(tk) * c.hkv * d);
  for (auto& x : q) x = round16(3.0f * uni(rng));
  for (auto& x : k) x = round16(uni(rng));
  for (auto& x : v) x = round16(uni(rng));
  std::vector<double> qd(q.size()), kd(k.size()), vd(v.size());
  for (size_t i = 0; i < q.size(); ++i) qd[i] = widen16(q[i]);
  for (size_t i = 0; i < k.size(); ++i) kd[i] = widen16(k[i]);
  for (size_t i = 0; i < v.size(); ++i) vd[i] = widen16(v[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> slopes(c.hq, 0.0f);
  for (int h = 0; h < c.hq; ++h) slopes[h] = c.alibi ? std::pow(2.0f, -8.0f * (h + 1) / c.hq) : 0.0f;

  // f64 reference; a row with no visible key is zero. Row i is at key position
  // pos = i + lk - lq; it sees keys j < lk, j <= pos if causal, j > pos - window.
  std::vector<double> ref(q.size(), 0.0), s, acc(d);
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < c.lq[b]; ++i)
      for (int h = 0; h < c.hq; ++h) {
        const int g = h / n_rep, pos = i + lk[b] - c.lq[b];
        const int last = c.causal ? std::min(lk[b] - 1, pos) : lk[b] - 1;
        const int first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
        if (last < first) continue;
        const double* qr = &qd[(static_cast<size_t>(cu_q[b] + i) * c.hq + h) * d];
        s.assign(last + 1, 0.0);
        double mx = -INFINITY;
        for (int j = first; j <= last; ++j) {
          const double* kr = &kd[(static_cast<size_t>(cu_k[b] + j) * c.hkv + g) * d];
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += qr[e] * kr[e];
          double x = dot * scale;
          if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
          s[j] = x + static_cast<double>(slopes[h]) * (j - pos);
          mx = std::max(mx, s[j]);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = first; j <= last; ++j) {
          const double p = std::exp(s[j] - mx);
          l += p;
          const double* vr = &vd[(static_cast<size_t>(cu_k[b] + j) * c.hkv + g) * d];
          for (int e = 0; e < d; ++e) acc[e] += p * vr[e];
        }
        double* o = &ref[(static_cast<size_t>(cu_q[b] + i) * c.hq + h) * d];
        for (int e = 0; e < d; ++e) o[e] = acc[e] / l;
      }

  DevBuf<uint16_t> dq, dk, dv, dout;
  DevBuf<int32_t> dcq, dck;
  DevBuf<float> dslopes;
  KVF_CUDA_CHECK(upload(dslopes, slopes));
  KVF_CUDA_CHECK(upload(dq, q, 1));
  KVF_CUDA_CHECK(upload(dk, k, 1));
  KVF_CUDA_CHECK(upload(dv, v, 1));
  KVF_CUDA_CHECK(upload(dout, std::vector<uint16_t>(q.size(), kNaN16), 1));
  KVF_CUDA_CHECK(upload(dcq, cu_q));
  KVF_CUDA_CHECK(upload(dck, cu_k));

  PrefillAttentionArgs a;
  a.kv_type = c.type;
  a.batch = batch;
  a.q_heads = c.hq;
  a.kv_heads = c.hkv;
  a.head_dim = d;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.out = dout.p;
  a.cu_seqlens_q = dcq.p;
  a.cu_seqlens_k = dck.p;
  a.max_seqlen_q = *std::max_element(c.lq.begin(), c.lq.end());
  a.total_q = tq;
  a.total_k = tk;
  a.scale = scale;
  a.causal = c.causal;
  a.softcap = c.softcap;
  a.alibi = c.alibi ? dslopes.p : nullptr;
  a.window = c.window;
  a.kernel = c.kernel;
  ASSERT_EQ(prefill_kernel_for(a), c.kernel);
  const Status st = prefill_attention(a);
  ASSERT_TRUE(st.ok()) << st.error().message();
  KVF_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(q.size());
  KVF_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, out.size() * 2, cudaMemcpyDeviceToHost));

  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double x = widen16(out[i]);
    if (!std::isfinite(x)) {
      if (bad++ < 3) ADD_FAILURE() << "output " << i << " not finite (unwritten?)";
      continue;
    }
    num += (x - ref[i]) * (x - ref[i]);
    den += ref[i] * ref[i];
  }
  ASSERT_EQ(bad, 0u) << bad << " of " << out.size() << " outputs not finite";
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LE(rel, 1e-2);
  worst_error().add(rel);
}

// Runs the case on mma.sync and, without softcap/ALiBi/window on an sm_90 device, on wgmma.
void run_case(Case c, uint64_t sd) {
  c.kernel = PrefillKernel::kMmaSync;
  run_case_on(c, sd);
  if (!c.mods() && has_wgmma()) {
    c.kernel = PrefillKernel::kWgmma;
    run_case_on(c, sd);
  }
}

class CudaPrefill : public ::testing::Test {
 protected:
  void SetUp() override {
    worst_error() = {};
    sd_ = test_seed();
    std::printf("[ seed  ] %llu\n", static_cast<unsigned long long>(sd_));
  }
  void TearDown() override {
    worst_error().print_and_reset();
  }
  void run(const Case& c) { run_case(c, sd_ + static_cast<uint64_t>(worst_error().cases) * 7919); }
  uint64_t sd_ = 0;
};

TEST_F(CudaPrefill, EveryHeadDimVarlen) {
  KVF_NEED_GPU();
  for (int d : {64, 128, 256})
    for (KvType t : {KvType::kBF16, KvType::kF16})
      for (bool causal : {true, false}) {
        Case c;
        c.type = t;
        c.d = d;
        c.causal = causal;
        c.lq = {1, 7, 129, 64};
        run(c);
        if (HasFatalFailure()) return;
      }
}

// A case over sequences of lq queries and lk keys (lk empty: lk = lq).
Case shaped(int d, bool causal, std::vector<int> lq, std::vector<int> lk) {
  Case c;
  c.d = d;
  c.causal = causal;
  c.lq = std::move(lq);
  c.lk = std::move(lk);
  return c;
}

TEST_F(CudaPrefill, ChunkedPrefillMoreKeysThanQueries) {
  KVF_NEED_GPU();
  for (int d : {64, 128, 256})
    for (bool causal : {true, false}) {
      run(shaped(d, causal, {7, 129, 1, 65}, {300, 193, 129, 64 + 65}));
      if (HasFatalFailure()) return;
    }
}

TEST_F(CudaPrefill, GqaGroups) {
  KVF_NEED_GPU();
  for (auto [hq, hkv] : {std::pair{8, 8}, std::pair{8, 1}, std::pair{32, 8}, std::pair{12, 4}})
    for (bool causal : {true, false}) {
      Case c;
      c.hq = hq;
      c.hkv = hkv;
      c.causal = causal;
      c.lq = {129, 70};
      c.lk = {129, 200};
      run(c);
      if (HasFatalFailure()) return;
    }
}

// Many turns of the K/V rings (33 to 65 tiles): causal d 128 and 256, full d 64.
TEST_F(CudaPrefill, LongSequence4097) {
  KVF_NEED_GPU();
  for (auto [d, causal] : {std::pair{128, true}, std::pair{256, true}, std::pair{64, false}}) {
    Case c;
    c.hq = 2;
    c.hkv = 1;
    c.d = d;
    c.causal = causal;
    c.lq = {4097};
    run(c);
    if (HasFatalFailure()) return;
  }
}

// Softcap, ALiBi and sliding windows (mma.sync; the wgmma kernel refuses them), every head
// dim, causal and not, over chunked and plain sequences; window 1 leaves each row one key.
TEST_F(CudaPrefill, SoftcapAlibiWindow) {
  KVF_NEED_GPU();
  for (int d : {64, 128, 256})
    for (bool causal : {true, false}) {
      Case c = shaped(d, causal, {129, 7, 300}, {129, 200, 300});
      c.softcap = 5.0f;
      run(c);
      c.softcap = 0.0f;
      c.alibi = true;
      run(c);
      c.alibi = false;
      c.window = 100;
      run(c);
      c.window = 1;
      run(c);
      c.softcap = 30.0f;  // all three at once
      c.alibi = true;
      c.window = 64;
      run(c);
      if (HasFatalFailure()) return;
    }
}

// Causal with fewer keys than queries: the first rows see no key and must be zeros; a
// sequence with no keys at all is zeros too; an empty query sequence writes nothing.
TEST_F(CudaPrefill, RowsWithoutKeysAreZero) {
  KVF_NEED_GPU();
  for (bool causal : {true, false}) {
    Case c;
    c.causal = causal;
    c.lq = {10, 5, 0, 3};
    c.lk = {4, 0, 6, 3};
    run(c);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaPrefillPlan, Refusals) {
  PrefillAttentionArgs a;
  alignas(16) int dummy[4] = {};
  a.q = a.k = a.v = dummy;
  a.out = dummy;
  a.cu_seqlens_q = a.cu_seqlens_k = dummy;
  a.max_seqlen_q = 1;
  a.head_dim = 96;
  Status s = check_prefill_attention(a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  a.head_dim = 128;
  a.q_heads = 6;
  a.kv_heads = 4;
  Status s2 = check_prefill_attention(a);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.error().code(), ErrorCode::kInvalidInput);
  a.q_heads = 8;
  a.k = nullptr;
  Status s3 = check_prefill_attention(a);
  ASSERT_FALSE(s3.ok());
  EXPECT_EQ(s3.error().code(), ErrorCode::kInvalidInput);
  a.k = dummy + 1;  // 4 bytes off: the kernels copy 16-byte rows
  Status s7 = check_prefill_attention(a);
  ASSERT_FALSE(s7.ok());
  EXPECT_EQ(s7.error().code(), ErrorCode::kInvalidInput);
  a.k = dummy;
  EXPECT_TRUE(check_prefill_attention(a).ok());
  a.kernel = PrefillKernel::kWgmma;  // the wgmma kernel has no softcap, ALiBi or window
  a.window = 16;
  Status s5 = check_prefill_attention(a);
  ASSERT_FALSE(s5.ok());
  EXPECT_EQ(s5.error().code(), ErrorCode::kUnsupported);
  a.kernel = PrefillKernel::kAuto;
  EXPECT_EQ(prefill_kernel_for(a), PrefillKernel::kMmaSync);
  a.window = -1;
  Status s6 = check_prefill_attention(a);
  ASSERT_FALSE(s6.ok());
  EXPECT_EQ(s6.error().code(), ErrorCode::kInvalidInput);
}

// On an H200 (sm_90) kAuto takes wgmma for every head dim, given the totals.
TEST(CudaPrefillPlan, AutoPicksWgmmaOnHopper) {
  KVF_NEED_GPU();
  int major = 0;
  KVF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  PrefillAttentionArgs a;
  a.total_q = a.total_k = 4096;
  for (int d : {64, 128, 256}) {
    a.head_dim = d;
    const bool want = major == 9;
    EXPECT_EQ(prefill_kernel_for(a), want ? PrefillKernel::kWgmma : PrefillKernel::kMmaSync) << "d" << d;
  }
  a.head_dim = 128;
  a.total_q = a.total_k = 0;  // unknown totals: no TMA maps, so mma.sync
  EXPECT_EQ(prefill_kernel_for(a), PrefillKernel::kMmaSync);
}

}  // namespace
}  // namespace kvf::exec::cuda
