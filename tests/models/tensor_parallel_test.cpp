// Tensor-parallel shards (models/tensor_parallel.h) against the whole model, in plain loops
// over a synthetic llama's weights: for 1, 2 and 4 ranks, every layer's feed-forward and
// attention products summed over the ranks (the all-reduce) equal the whole layer's, the
// embedding rows summed and the classifier rows concatenated equal the whole ones, norms
// and rank-zero biases sit where they must; and the splits the model does not allow are
// refused, naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/tensor_parallel.h"
#include "testing.h"

namespace kvf {
namespace {

using models::TpRank;

const float* f32(const models::Weights& w, const std::string& name) { return w.tensors().at(name).data<float>(); }
int64_t rows_of(const models::Weights& w, const std::string& name) { return w.tensors().at(name).shape()[0]; }

// y [rows] = w [rows, cols] · x
std::vector<double> matvec(const float* w, int64_t rows, int64_t cols, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(r)] += w[r * cols + c] * x[static_cast<size_t>(c)];
  }
  return y;
}

void add_into(std::vector<double>& acc, const std::vector<double>& y) {
  if (acc.empty()) acc.assign(y.size(), 0.0);
  for (size_t i = 0; i < y.size(); ++i) acc[i] += y[i];
}

double rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

std::vector<double> random_vec(std::mt19937_64& rng, int64_t n) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

// down · (silu(gate · x) ⊙ (up · x)) of layer l, as weights w of config c hold it.
std::vector<double> feed_forward(const models::ModelConfig& c, const models::Weights& w, int64_t l,
                                 const std::vector<double>& x) {
  const std::string p = str_cat("blk.", l, ".");
  const std::vector<double> g = matvec(f32(w, p + "ffn_gate.weight"), c.hidden_dim, c.dim, x),
                            u = matvec(f32(w, p + "ffn_up.weight"), c.hidden_dim, c.dim, x);
  std::vector<double> a(g.size());
  for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return matvec(f32(w, p + "ffn_down.weight"), c.dim, c.hidden_dim, a);
}

// o · attention of the last of the rows hs (no rope, no mask: the split is over heads, and
// what happens inside a head is the same on every rank), each query head h reading kv head
// h / (n_heads / n_kv_heads) of its own config.
std::vector<double> attention(const models::ModelConfig& c, const models::Weights& w, int64_t l,
                              const std::vector<std::vector<double>>& hs) {
  const std::string p = str_cat("blk.", l, ".");
  const int64_t hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  std::vector<std::vector<double>> k, v;
  for (const auto& h : hs) {
    k.push_back(matvec(f32(w, p + "attn_k.weight"), c.n_kv_heads * hd, c.dim, h));
    v.push_back(matvec(f32(w, p + "attn_v.weight"), c.n_kv_heads * hd, c.dim, h));
  }
  const std::vector<double> q = matvec(f32(w, p + "attn_q.weight"), c.n_heads * hd, c.dim, hs.back());
  std::vector<double> heads(static_cast<size_t>(c.n_heads * hd), 0.0);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    const int64_t kv = h / group;
    std::vector<double> s;
    double top = -INFINITY, sum = 0;
    for (size_t t = 0; t < hs.size(); ++t) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += q[static_cast<size_t>(h * hd + i)] * k[t][static_cast<size_t>(kv * hd + i)];
      s.push_back(d / std::sqrt(static_cast<double>(hd)));
      top = std::max(top, s.back());
    }
    for (double& x : s) sum += x = std::exp(x - top);
    for (size_t t = 0; t < hs.size(); ++t) {
      for (int64_t i = 0; i < hd; ++i) heads[static_cast<size_t>(h * hd + i)] += s[t] / sum * v[t][static_cast<size_t>(kv * hd + i)];
    }
  }
  return matvec(f32(w, p + "attn_output.weight"), c.dim, c.n_heads * hd, heads);
}

struct Sharded {
  models::ModelConfig config;
  models::Weights weights;
};

std::vector<Sharded> shard(const models::Model& m, int size) {
  std::vector<Sharded> out;
  for (int r = 0; r < size; ++r) {
    out.push_back({testing::must(models::tp_config(m.config, {r, size})),
                   testing::must(models::tp_weights(m.config, m.weights, {r, size}))});
  }
  return out;
}

TEST(TensorParallel, ShardsSumToEveryLayersProducts) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  std::mt19937_64 rng(testing::test_seed());
  for (int size : {1, 2, 4}) {
    const std::vector<Sharded> ranks = shard(m, size);
    for (int64_t l = 0; l < m.config.n_layers; ++l) {
      const std::vector<double> x = random_vec(rng, m.config.dim);
      std::vector<double> ffn, att;
      std::vector<std::vector<double>> hs;
      for (int t = 0; t < 5; ++t) hs.push_back(random_vec(rng, m.config.dim));
      for (const Sharded& s : ranks) {
        add_into(ffn, feed_forward(s.config, s.weights, l, x));
        add_into(att, attention(s.config, s.weights, l, hs));
      }
      EXPECT_LT(rel(ffn, feed_forward(m.config, m.weights, l, x)), 1e-12) << size << " ranks, layer " << l;
      EXPECT_LT(rel(att, attention(m.config, m.weights, l, hs)), 1e-12) << size << " ranks, layer " << l;
    }
  }
}

TEST(TensorParallel, EmbeddingRowsSumAndClassifierRowsConcatenate) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");
  const int64_t vocab = m.config.vocab, dim = m.config.dim;
  const char* classifier = m.weights.has("output.weight") ? "output.weight" : "token_embd.weight";
  std::mt19937_64 rng(testing::test_seed());
  const std::vector<double> x = random_vec(rng, dim);
  const std::vector<double> logits = matvec(f32(m.weights, classifier), vocab, dim, x);
  for (int size : {2, 4}) {  // (uneven vocabulary rows: VocabRowsCoverTheVocabularyOnce)
    const std::vector<Sharded> ranks = shard(m, size);
    std::vector<double> gathered;
    for (int r = 0; r < size; ++r) {
      const models::Weights& w = ranks[static_cast<size_t>(r)].weights;
      const auto [v0, v1] = models::tp_vocab_rows(vocab, {r, size});
      ASSERT_EQ(rows_of(w, classifier), v1 - v0);
      const std::vector<double> part = matvec(f32(w, classifier), v1 - v0, dim, x);
      gathered.insert(gathered.end(), part.begin(), part.end());
    }
    EXPECT_EQ(gathered, logits) << size << " ranks";
    for (int32_t id : {0, 1, static_cast<int32_t>(vocab / 2), static_cast<int32_t>(vocab - 1)}) {
      std::vector<double> row(static_cast<size_t>(dim), 0.0);
      int holders = 0;
      for (int r = 0; r < size; ++r) {
        const auto [v0, v1] = models::tp_vocab_rows(vocab, {r, size});
        if (id < v0 || id >= v1) continue;  // this rank's lookup gives zeros
        ++holders;
        const float* e = f32(ranks[static_cast<size_t>(r)].weights, "token_embd.weight") + (id - v0) * dim;
        for (int64_t i = 0; i < dim; ++i) row[static_cast<size_t>(i)] += e[i];
      }
      EXPECT_EQ(holders, 1) << "id " << id;
      const float* e = f32(m.weights, "token_embd.weight") + id * dim;
      for (int64_t i = 0; i < dim; ++i) ASSERT_EQ(row[static_cast<size_t>(i)], e[i]) << "id " << id;
    }
  }
}

TEST(TensorParallel, VocabRowsCoverTheVocabularyOnce) {
  for (const auto& [vocab, size] : {std::pair{32000, 3}, std::pair{512, 4}, std::pair{5, 4}, std::pair{7, 1}}) {
    int64_t next = 0;
    for (int r = 0; r < size; ++r) {
      const auto [v0, v1] = models::tp_vocab_rows(vocab, {r, size});
      EXPECT_EQ(v0, next);
      EXPECT_TRUE(v1 - v0 == vocab / size || v1 - v0 == vocab / size + 1);
      next = v1;
    }
    EXPECT_EQ(next, vocab);
  }
}

TEST(TensorParallel, NormsAreWholeAndAnAddedBiasIsRankZeros) {
  models::ModelConfig c;
  c.dim = 4, c.n_heads = 2, c.n_kv_heads = 2, c.head_dim = 2, c.hidden_dim = 4, c.vocab = 6;
  models::Weights w;
  const std::vector<float> norm{1, 2, 3, 4}, bias{5, 6, 7, 8}, qb{1, 2, 3, 4};
  w.add("blk.0.attn_norm.weight", testing::must(HostTensor::from_f32({4}, norm)));
  w.add("blk.0.attn_output.bias", testing::must(HostTensor::from_f32({4}, bias)));
  w.add("blk.0.attn_q.bias", testing::must(HostTensor::from_f32({4}, qb)));
  for (int r = 0; r < 2; ++r) {
    const models::Weights s = testing::must(models::tp_weights(c, w, {r, 2}));
    EXPECT_EQ(testing::must(s.tensors().at("blk.0.attn_norm.weight").to_f32()), norm);
    EXPECT_EQ(testing::must(s.tensors().at("blk.0.attn_output.bias").to_f32()),
              r == 0 ? bias : std::vector<float>(4, 0.0f));
    EXPECT_EQ(testing::must(s.tensors().at("blk.0.attn_q.bias").to_f32()),
              (std::vector<float>{qb[static_cast<size_t>(2 * r)], qb[static_cast<size_t>(2 * r + 1)]}));
  }
}

TEST(TensorParallel, RefusesWhatItCannotSplit) {
  const models::Model m = testing::open_test_model("synthetic:llama-260k");  // 8 heads, 4 KV heads, ffn 172
  const auto refusal = [](const auto& r) { return r.ok() ? std::string("accepted") : r.error().message(); };
  EXPECT_NE(refusal(models::tp_config(m.config, {0, 3})).find("n_heads 8 is not a multiple of 3"), std::string::npos);
  EXPECT_NE(refusal(models::tp_config(m.config, {0, 8})).find("n_kv_heads 4"), std::string::npos);
  const Result<models::ModelConfig> no_such_rank = models::tp_config(m.config, {2, 2});
  ASSERT_FALSE(no_such_rank.ok());
  EXPECT_EQ(no_such_rank.error().code(), ErrorCode::kInvalidInput);
  const models::ModelConfig half = testing::must(models::tp_config(m.config, {1, 2}));
  EXPECT_EQ(half.n_heads, 4);
  EXPECT_EQ(half.n_kv_heads, 2);
  EXPECT_EQ(half.hidden_dim, 86);
  EXPECT_EQ(half.vocab, m.config.vocab);
  EXPECT_EQ(half.tp_rank, 1);
  EXPECT_EQ(half.tp_size, 2);
  EXPECT_NE(refusal(models::tp_config(half, {0, 2})).find("already rank 1 of 2"), std::string::npos);

  models::ModelConfig c;
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 4, c.head_dim = 16, c.hidden_dim = 64, c.vocab = 8;
  models::Weights fused;
  fused.add("blk.0.attn_qkv.weight", testing::must(HostTensor::zeros(DType::kF32, {192, 64})));
  EXPECT_NE(refusal(models::tp_weights(c, fused, {0, 2})).find("blk.0.attn_qkv.weight has no split"), std::string::npos);
  models::Weights q8;  // o's columns of 2 heads of 16: half a q8_0 block each
  q8.add("blk.0.attn_output.weight", testing::must(HostTensor::zeros(DType::kQ8_0, {64, 64})));
  EXPECT_TRUE(models::tp_weights(c, q8, {1, 2}).ok());
  EXPECT_NE(refusal(models::tp_weights(c, q8, {1, 4})).find("cut through q8_0 blocks of 32"), std::string::npos);
  c.n_experts = 4;
  EXPECT_NE(refusal(models::tp_config(c, {0, 2})).find("experts"), std::string::npos);
  c.n_experts = 0;
  c.arch = "gpt2";  // a family whose tracer has no all-reduces: refused, never traced whole on a rank
  EXPECT_NE(refusal(models::tp_config(c, {0, 2})).find("the gpt2 tracer does not split (llama, mistral, qwen2, qwen3 do)"),
            std::string::npos)
      << refusal(models::tp_config(c, {0, 2}));
}

}  // namespace
}  // namespace kvf
