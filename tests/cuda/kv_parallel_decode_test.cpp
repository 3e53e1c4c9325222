// Context-parallel decode on the GPU's kernels (exec/cuda/attention.h): a sequence's keys
// dealt over ranks by 16-token block, round-robin (plan/kv_shards.h's rule); each rank's
// decode over its own keys alone gives its partial and softmax state (decode_attention's ml),
// and merge_attention_partials joins them into the one decode over every key. Checked
// against an f64 attention on the host and against the one-device decode, on random inputs,
// both decode kernels, pools of shuffled blocks and dense caches read through maps of
// positions (map_positions), 1 to 4 ranks, rows of one key, of no key, and longer than a
// rank's share; and the merge alone against an f64 merge, parts that saw no key included,
// packed or a part's o and ml side by side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "exec/cuda/attention.h"
#include "gpu_testing.h"

namespace kvf::exec::cuda {
namespace {

using namespace kvf::testing;  // gpu_testing.h

constexpr int kBlock = 16;  // tokens a block: the unit ranks own

struct Shape {
  bool pool = true;  // a pool of shuffled blocks; false: a dense cache, the ranks reading it through maps of positions
  int batch = 3, hq = 8, hkv = 2, d = 64;
  std::vector<int> lens = {1000, 1, 0};
  DecodeKernel kernel = DecodeKernel::kSimt;
  int rows() const { return batch * hq; }
};

// f64 attention of one query row over keys [0, len) and its log-sum-exp; zeros and -inf with
// no key. k, v: [B, Hkv, cap, d] 16-bit f16 words.
struct RowRef {
  std::vector<double> o;
  double lse = -INFINITY;
};
RowRef reference_row(const Shape& s, int cap, int b, int h, const std::vector<float>& q,
                     const std::vector<uint16_t>& k, const std::vector<uint16_t>& v) {
  RowRef r;
  r.o.assign(static_cast<size_t>(s.d), 0.0);
  const int g = h / (s.hq / s.hkv);
  const double scale = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(s.d)));
  std::vector<double> sc(static_cast<size_t>(s.lens[b]));
  for (int t = 0; t < s.lens[b]; ++t) {
    double dot = 0;
    for (int c = 0; c < s.d; ++c)
      dot += static_cast<double>(q[(static_cast<size_t>(b) * s.hq + h) * s.d + c]) *
             f16_to_f32(k[((static_cast<size_t>(b) * s.hkv + g) * cap + t) * s.d + c]);
    sc[static_cast<size_t>(t)] = dot * static_cast<double>(static_cast<float>(scale));
  }
  if (sc.empty()) return r;
  const double m = *std::max_element(sc.begin(), sc.end());
  double l = 0;
  for (double& x : sc) l += (x = std::exp(x - m));
  for (int t = 0; t < s.lens[b]; ++t)
    for (int c = 0; c < s.d; ++c)
      r.o[static_cast<size_t>(c)] += sc[static_cast<size_t>(t)] / l * f16_to_f32(v[((static_cast<size_t>(b) * s.hkv + g) * cap + t) * s.d + c]);
  r.lse = m + std::log(l);
  return r;
}

// The merged ranks' worst relative L2 distance from the one-device decode, printed at the end.
double& worst_apart() {
  static double w = 0;
  return w;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The keys of row `len` that rank r of `ranks` owns, in order.
std::vector<int> rank_keys(int r, int ranks, int len) {
  std::vector<int> keys;
  for (int t = 0; t < len; ++t)
    if ((t / kBlock) % ranks == r) keys.push_back(t);
  return keys;
}

template <class T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// The log-sum-exp of a softmax state (m, l) in log2 units: -inf for (-inf, 0).
double lse_of(const float* ml) { return ml[1] > 0 ? (ml[0] + std::log2(static_cast<double>(ml[1]))) * std::log(2.0) : -INFINITY; }

// One decode of every row over the pool rows its read map lists (its first lens[b]):
// out [rows, d] and ml [rows, 2].
void decode(const DecodeAttentionArgs& base, const int32_t* map, const int32_t* lens, int max_len,
            float* out, float* ml) {
  DecodeAttentionArgs a = base;
  a.read_map = map;
  a.map_positions = map != nullptr && a.capacity > 0;
  a.lens = lens;
  a.max_len = max_len;
  a.out = out;
  a.ml = ml;
  Result<DecodePlan> plan = plan_decode_attention(a);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  DevBuf<char> ws;
  if (plan->workspace_bytes > 0) {
    KVF_CUDA_CHECK(cudaMalloc(&ws.p, plan->workspace_bytes));
    ASSERT_TRUE(prepare_decode_workspace(*plan, ws.p).ok());
  }
  Status st = decode_attention(a, *plan, ws.p);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  KVF_CUDA_CHECK(cudaDeviceSynchronize());
}

void run_ranks(const Shape& s, int ranks, uint64_t sd) {
  SCOPED_TRACE(std::to_string(ranks) + " ranks, d" + std::to_string(s.d) + (s.pool ? " pool" : " dense") +
               (s.kernel == DecodeKernel::kTensorCores ? " tensor cores" : " simt") + " seed " + std::to_string(sd));
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int max_len = *std::max_element(s.lens.begin(), s.lens.end());
  const int cap = max_len + 3;
  std::vector<uint16_t> k(static_cast<size_t>(s.batch) * s.hkv * cap * s.d), v(k.size());
  for (auto& x : k) x = f32_to_f16(uni(rng));
  for (auto& x : v) x = f32_to_f16(uni(rng));
  std::vector<float> q(static_cast<size_t>(s.rows()) * s.d);
  for (float& x : q) x = 3.0f * uni(rng);

  // The pool: key t of row b in slot b * cap + t ([slots, Hkv, d]), slots shuffled by block.
  std::vector<int> block_slot(static_cast<size_t>(s.batch) * ((cap + kBlock - 1) / kBlock));
  std::iota(block_slot.begin(), block_slot.end(), 0);
  std::shuffle(block_slot.begin(), block_slot.end(), rng);
  const int blocks_per_row = (cap + kBlock - 1) / kBlock;
  auto slot_of = [&](int b, int t) { return block_slot[static_cast<size_t>(b) * blocks_per_row + t / kBlock] * kBlock + t % kBlock; };
  const size_t slots = block_slot.size() * kBlock;
  std::vector<uint16_t> kp(slots * s.hkv * s.d, kNaN16), vp(kp.size(), kNaN16);
  for (int b = 0; b < s.batch; ++b)
    for (int t = 0; t < s.lens[b]; ++t)
      for (int g = 0; g < s.hkv; ++g)
        for (int c = 0; c < s.d; ++c) {
          const size_t at = (static_cast<size_t>(slot_of(b, t)) * s.hkv + g) * s.d + c;
          kp[at] = k[((static_cast<size_t>(b) * s.hkv + g) * cap + t) * s.d + c];
          vp[at] = v[((static_cast<size_t>(b) * s.hkv + g) * cap + t) * s.d + c];
        }

  if (!s.pool) {  // the dense cache, NaN past each row's length; maps list positions
    kp = k;
    vp = v;
    for (int b = 0; b < s.batch; ++b)
      for (int g = 0; g < s.hkv; ++g) {
        const size_t row = (static_cast<size_t>(b) * s.hkv + g) * cap;
        std::fill(kp.begin() + static_cast<std::ptrdiff_t>((row + s.lens[b]) * s.d),
                  kp.begin() + static_cast<std::ptrdiff_t>((row + cap) * s.d), kNaN16);
        std::fill(vp.begin() + static_cast<std::ptrdiff_t>((row + s.lens[b]) * s.d),
                  vp.begin() + static_cast<std::ptrdiff_t>((row + cap) * s.d), kNaN16);
      }
  }
  const auto entry = [&](int b, int t) { return s.pool ? slot_of(b, t) : t; };

  // Read maps: the whole row's (one device), and each rank's share, compacted.
  std::vector<int32_t> all_map(static_cast<size_t>(s.batch) * cap, 0);
  std::vector<std::vector<int32_t>> map(static_cast<size_t>(ranks), std::vector<int32_t>(all_map.size(), 0));
  std::vector<std::vector<int32_t>> lens(static_cast<size_t>(ranks), std::vector<int32_t>(static_cast<size_t>(s.batch)));
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.lens[b]; ++t) all_map[static_cast<size_t>(b) * cap + t] = entry(b, t);
    for (int r = 0; r < ranks; ++r) {
      const std::vector<int> keys = rank_keys(r, ranks, s.lens[b]);
      lens[static_cast<size_t>(r)][static_cast<size_t>(b)] = static_cast<int32_t>(keys.size());
      for (size_t j = 0; j < keys.size(); ++j) map[static_cast<size_t>(r)][static_cast<size_t>(b) * cap + j] = entry(b, keys[j]);
    }
  }

  DevBuf<float> dq, dparts, dml, dout, dout_ml, done, done_ml;
  DevBuf<uint16_t> dk, dv;
  DevBuf<int32_t> dall_map, dall_lens;
  KVF_CUDA_CHECK(upload(dq, q));
  KVF_CUDA_CHECK(upload(dk, kp));
  KVF_CUDA_CHECK(upload(dv, vp));
  KVF_CUDA_CHECK(upload(dall_map, all_map));
  KVF_CUDA_CHECK(upload(dall_lens, s.lens));
  const size_t rows = static_cast<size_t>(s.rows());
  for (DevBuf<float>* b : {&dparts, &dml, &dout, &dout_ml, &done, &done_ml}) {
    const size_t n = b == &dparts ? ranks * rows * s.d : b == &dml ? ranks * rows * 2 : (b == &dout || b == &done) ? rows * s.d : rows * 2;
    KVF_CUDA_CHECK(cudaMalloc(&b->p, n * sizeof(float)));
    KVF_CUDA_CHECK(cudaMemset(b->p, 0xff, n * sizeof(float)));  // NaN: an unwritten element fails
  }
  DecodeAttentionArgs a;
  a.kv_type = KvType::kF16;
  a.batch = s.batch;
  a.q_heads = s.hq;
  a.kv_heads = s.hkv;
  a.dk = a.dv = s.d;
  a.q = dq.p;
  a.k = dk.p;
  a.v = dv.p;
  a.map_stride = cap;
  a.capacity = s.pool ? 0 : cap;
  a.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  a.kernel = s.kernel;

  decode(a, s.pool ? dall_map.p : nullptr, dall_lens.p, max_len, done.p, done_ml.p);  // dense: in order
  for (int r = 0; r < ranks; ++r) {  // rank r's decode over its keys alone, into its part
    DevBuf<int32_t> dmap, dlens;
    KVF_CUDA_CHECK(upload(dmap, map[static_cast<size_t>(r)]));
    KVF_CUDA_CHECK(upload(dlens, lens[static_cast<size_t>(r)]));
    const int rank_max = *std::max_element(lens[static_cast<size_t>(r)].begin(), lens[static_cast<size_t>(r)].end());
    decode(a, dmap.p, dlens.p, rank_max, dparts.p + r * rows * s.d, dml.p + r * rows * 2);
  }
  PartialsMergeArgs m;
  m.parts = ranks;
  m.rows = static_cast<int>(rows);
  m.dv = s.d;
  m.o = dparts.p;
  m.ml = dml.p;
  m.out = dout.p;
  m.out_ml = dout_ml.p;
  Status st = merge_attention_partials(m);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  KVF_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<double> want(rows * s.d), want_lse(rows);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.hq; ++h) {
      const RowRef r = reference_row(s, cap, b, h, q, k, v);
      std::copy(r.o.begin(), r.o.end(), want.begin() + (static_cast<size_t>(b) * s.hq + h) * s.d);
      want_lse[static_cast<size_t>(b) * s.hq + h] = r.lse;
    }
  const std::vector<float> one = download(done.p, rows * s.d), merged = download(dout.p, rows * s.d);
  const std::vector<float> one_ml = download(done_ml.p, rows * 2), merged_ml = download(dout_ml.p, rows * 2);
  EXPECT_LE(rel_l2(one, want), 1e-4) << "the one-device decode";
  EXPECT_LE(rel_l2(merged, want), 1e-4) << "the merged ranks";
  const double apart = rel_l2(merged, std::vector<double>(one.begin(), one.end()));
  EXPECT_LE(apart, 2e-6) << "the merged ranks against one device";
  worst_apart() = std::max(worst_apart(), apart);
  for (size_t i = 0; i < rows; ++i) {
    if (want_lse[i] == -INFINITY) {  // a row with no key: zeros and (-inf, 0) on both
      EXPECT_EQ(one_ml[2 * i], -INFINITY) << "row " << i;
      EXPECT_EQ(one_ml[2 * i + 1], 0.0f) << "row " << i;
      EXPECT_EQ(merged_ml[2 * i], -INFINITY) << "row " << i;
      EXPECT_EQ(merged_ml[2 * i + 1], 0.0f) << "row " << i;
      for (int c = 0; c < s.d; ++c) ASSERT_EQ(merged[i * s.d + c], 0.0f) << "row " << i;
      continue;
    }
    EXPECT_NEAR(lse_of(&one_ml[2 * i]), want_lse[i], 1e-5 * std::max(1.0, std::abs(want_lse[i]))) << "row " << i;
    EXPECT_NEAR(lse_of(&merged_ml[2 * i]), want_lse[i], 1e-5 * std::max(1.0, std::abs(want_lse[i]))) << "row " << i;
  }
}

TEST(CudaKvParallelDecode, RanksMergeToTheOneDeviceDecode) {
  KVF_NEED_GPU();
  const uint64_t sd = test_seed();
  for (bool pool : {true, false}) {
    for (DecodeKernel kernel : {DecodeKernel::kSimt, DecodeKernel::kTensorCores}) {
      for (int d : {64, 128}) {
        for (int ranks : {1, 2, 3, 4}) {
          Shape s;
          s.pool = pool;
          s.d = d;
          s.kernel = kernel;
          s.lens = {1000 + ranks, 1, 0, 17, 4100};  // a row in one rank's block, one of none, one past a block
          s.batch = static_cast<int>(s.lens.size());
          run_ranks(s, ranks, sd + static_cast<uint64_t>(d * 10 + ranks + (pool ? 0 : 5)));
        }
      }
    }
  }
  std::printf("[ worst ] merged ranks against one device: rel L2 %.3g\n", worst_apart());
}

TEST(CudaKvParallelDecode, MergeMatchesTheF64Merge) {
  KVF_NEED_GPU();
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int parts : {1, 2, 5, 40})
    for (int dv : {64, 100, 512}) {
      SCOPED_TRACE(std::to_string(parts) + " parts, dv " + std::to_string(dv));
      const int rows = 37;
      std::vector<float> o(static_cast<size_t>(parts) * rows * dv), ml(static_cast<size_t>(parts) * rows * 2);
      for (float& x : o) x = uni(rng);
      for (size_t at = 0; at < ml.size(); at += 2) {
        ml[at] = 30.0f * uni(rng);              // m, in log2 units
        ml[at + 1] = 1.0f + 50.0f * (uni(rng) + 1.0f);  // l >= 1: the max's own term
      }
      for (int i = 0; i < rows; ++i) {  // row 0: no part saw a key; every 3rd part of odd rows: none
        for (int r = 0; r < parts; ++r) {
          if (i == 0 || (r % 3 == 2 && i % 2 == 1)) {
            const size_t at = static_cast<size_t>(r) * rows + i;
            ml[2 * at] = -INFINITY;
            ml[2 * at + 1] = 0.0f;
            o[at * dv] = NAN;  // anything: an empty part adds nothing
          }
        }
      }
      DevBuf<float> d_o, d_ml, d_out, d_out_ml;
      KVF_CUDA_CHECK(upload(d_o, o));
      KVF_CUDA_CHECK(upload(d_ml, ml));
      KVF_CUDA_CHECK(cudaMalloc(&d_out.p, static_cast<size_t>(rows) * dv * 4));
      KVF_CUDA_CHECK(cudaMalloc(&d_out_ml.p, static_cast<size_t>(rows) * 2 * 4));
      Status st = merge_attention_partials({parts, rows, dv, d_o.p, d_ml.p, d_out.p, d_out_ml.p});
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      const std::vector<float> out = download(d_out.p, static_cast<size_t>(rows) * dv);
      const std::vector<float> out_ml = download(d_out_ml.p, static_cast<size_t>(rows) * 2);
      for (int i = 0; i < rows; ++i) {
        double big_m = -INFINITY;
        for (int r = 0; r < parts; ++r) {
          const size_t at = static_cast<size_t>(r) * rows + i;
          if (ml[2 * at + 1] > 0) big_m = std::max(big_m, static_cast<double>(ml[2 * at]));
        }
        if (big_m == -INFINITY) {
          EXPECT_EQ(out_ml[2 * static_cast<size_t>(i)], -INFINITY);
          EXPECT_EQ(out_ml[2 * static_cast<size_t>(i) + 1], 0.0f);
          for (int c = 0; c < dv; ++c) ASSERT_EQ(out[static_cast<size_t>(i) * dv + c], 0.0f) << "row " << i;
          continue;
        }
        double l = 0;
        std::vector<double> acc(static_cast<size_t>(dv), 0.0);
        for (int r = 0; r < parts; ++r) {
          const size_t at = static_cast<size_t>(r) * rows + i;
          if (ml[2 * at + 1] == 0) continue;
          const double w = std::exp2(ml[2 * at] - big_m) * ml[2 * at + 1];
          l += w;
          for (int c = 0; c < dv; ++c) acc[static_cast<size_t>(c)] += w * o[at * dv + c];
        }
        for (int c = 0; c < dv; ++c)
          ASSERT_NEAR(out[static_cast<size_t>(i) * dv + c], acc[static_cast<size_t>(c)] / l, 1e-6) << "row " << i << " col " << c;
        EXPECT_EQ(out_ml[2 * static_cast<size_t>(i)], static_cast<float>(big_m));
        EXPECT_NEAR(out_ml[2 * static_cast<size_t>(i) + 1], l, 1e-6 * l);
      }
      // The same parts laid out a part at a time, its o then its ml (what a context-parallel
      // rank gathers as one block): the same bits.
      const size_t n = static_cast<size_t>(rows) * (dv + 2);
      std::vector<float> blocks(static_cast<size_t>(parts) * n);
      for (int r = 0; r < parts; ++r) {
        std::copy_n(o.begin() + static_cast<std::ptrdiff_t>(r) * rows * dv, rows * dv, blocks.begin() + r * n);
        std::copy_n(ml.begin() + static_cast<std::ptrdiff_t>(r) * rows * 2, rows * 2, blocks.begin() + r * n + rows * dv);
      }
      DevBuf<float> d_blocks, d_out2;
      KVF_CUDA_CHECK(upload(d_blocks, blocks));
      KVF_CUDA_CHECK(cudaMalloc(&d_out2.p, static_cast<size_t>(rows) * dv * 4));
      PartialsMergeArgs strided{parts, rows, dv, d_blocks.p, d_blocks.p + rows * dv, d_out2.p, nullptr};
      strided.o_stride = strided.ml_stride = static_cast<int64_t>(n);
      st = merge_attention_partials(strided);
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      EXPECT_EQ(download(d_out2.p, static_cast<size_t>(rows) * dv), out);
    }
}

// Refused before anything reaches the device: no GPU needed.
TEST(CudaKvParallelDecode, MergeRefusesBadArguments) {
  float x = 0;
  EXPECT_EQ(merge_attention_partials({0, 1, 64, &x, &x, &x, nullptr}).error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(merge_attention_partials({2, 1, 0, &x, &x, &x, nullptr}).error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(merge_attention_partials({2, 1, 64, nullptr, &x, &x, nullptr}).error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(merge_attention_partials({2, 1, 64, &x, &x, nullptr, nullptr}).error().code(), ErrorCode::kInvalidInput);
  PartialsMergeArgs overlapping{2, 3, 64, &x, &x, &x, nullptr};
  overlapping.o_stride = 3 * 64 - 1;  // parts closer than their rows
  EXPECT_EQ(merge_attention_partials(overlapping).error().code(), ErrorCode::kInvalidInput);
  EXPECT_TRUE(merge_attention_partials({2, 0, 64, nullptr, nullptr, nullptr, nullptr}).ok());  // no rows: nothing to do
}

}  // namespace
}  // namespace kvf::exec::cuda
