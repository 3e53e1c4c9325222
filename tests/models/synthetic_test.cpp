// Synthetic models and their GGUF export: the llama-125m benchmark preset has the benchmark's
// shapes and N(0, 0.02) weights; a synthetic llama converted to f32/f16/q8_0 reads back
// equal to its source within the format's rounding, checked against references written
// here in double; a llama.cpp vocab-only GGUF's tokenizer survives the export.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>

#include "load/gguf.h"
#include "load/vocab_readers.h"
#include "models/export_gguf.h"
#include "models/model.h"
#include "models/synthetic.h"
#include "testing.h"

namespace kvf {
namespace {

const models::OpenOptions kNoTokenizer{.tokenizer_path = "", .check_finite = true, .with_tokenizer = false};

std::string temp_gguf(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / str_cat("kvf_synthetic_", tag, "_", ::getpid(), ".gguf")).string();
}

std::vector<double> values(const HostTensor& t) {
  const std::vector<float> f = testing::must(t.to_f32());
  return {f.begin(), f.end()};
}

// IEEE half round-to-nearest-even, in double: the grid spacing of |x|'s binade (at least
// the subnormal step 2^-24), ties to the even multiple. Inputs here are far below 65504.
double f16_rne(double x) {
  if (x == 0.0) return x;
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(std::fabs(x)) - 10, -24));
  const double m = x / ulp, lo = std::floor(m);
  double r = m - lo > 0.5 ? lo + 1 : lo;
  if (m - lo == 0.5) r = std::fmod(lo, 2.0) == 0.0 ? lo : lo + 1;
  return r * ulp;
}

// ---- the llama-125m preset

TEST(Synthetic, Llama125mHasTheBenchmarkShapesAndNormalWeights) {
  const models::Model m = testing::must(models::open_synthetic("llama-125m", testing::test_seed()));
  const models::ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.vocab, 32000);
  EXPECT_EQ(c.dim, 768);
  EXPECT_EQ(c.n_layers, 12);
  EXPECT_EQ(c.n_heads, 12);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.hidden_dim, 2048);
  EXPECT_GE(c.context, 16384 + 64);  // decode at depth 16384
  // 2 embeddings of 32000 x 768 + 12 layers of (q, k, v, o, gate, up, down, 2 norms) + norm.
  const int64_t layer = 768 * 768 * 2 + 256 * 768 * 2 + 2048 * 768 * 3 + 768 * 2;
  EXPECT_EQ(m.weights.parameter_count(), 2 * 32000 * 768 + 12 * layer + 768);
  // Every norm is 1; the statistics are checked on a sample of the matrices (all of them
  // would take a while under the sanitizers).
  const std::set<std::string> sampled{"token_embd.weight", "blk.0.attn_q.weight", "blk.5.attn_k.weight",
                                      "blk.11.ffn_down.weight", "output.weight"};
  for (const auto& [name, t] : m.weights.tensors()) {
    if (t.rank() == 1) {
      for (double x : values(t)) ASSERT_EQ(x, 1.0) << name;  // every 1-D tensor of a llama is a norm
      continue;
    }
    if (!sampled.count(name)) continue;
    const std::vector<double> v = values(t);
    double sum = 0, sq = 0;
    int64_t in1 = 0, in2 = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x)) << name;
      sum += x;
      sq += x * x;
      in1 += std::fabs(x) <= 0.02;
      in2 += std::fabs(x) <= 0.04;
    }
    const double n = static_cast<double>(v.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 6 * 0.02 / std::sqrt(n)) << name;
    EXPECT_NEAR(sd, 0.02, 0.02 * 6 / std::sqrt(2 * n)) << name;
    EXPECT_NEAR(in1 / n, 0.682689, 6 * 0.47 / std::sqrt(n)) << name;  // Φ(1) - Φ(-1)
    EXPECT_NEAR(in2 / n, 0.954500, 6 * 0.21 / std::sqrt(n)) << name;  // Φ(2) - Φ(-2)
  }
}

TEST(Synthetic, WeightsFollowTheSeed) {
  const uint64_t seed = testing::test_seed();
  const models::Model a = testing::must(models::open_synthetic("llama-260k", seed));
  const models::Model b = testing::must(models::open_synthetic("llama-260k", seed));
  const models::Model c = testing::must(models::open_synthetic("llama-260k", seed + 1));
  const std::string name = "blk.2.attn_q.weight";
  const HostTensor& ta = a.weights.tensors().at(name);
  EXPECT_EQ(std::memcmp(ta.raw(), b.weights.tensors().at(name).raw(), ta.nbytes()), 0);
  EXPECT_NE(std::memcmp(ta.raw(), c.weights.tensors().at(name).raw(), ta.nbytes()), 0);
}

// ---- export with --outtype, read back

// Exports `m` with the given outtype and opens the file again (weights borrowed as stored).
models::Model round_trip(const models::Model& m, std::optional<DType> outtype, const std::string& tag) {
  const std::string path = temp_gguf(tag);
  models::ExportOptions opts;
  opts.outtype = outtype;
  Status s = models::export_gguf(m, path, opts);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().to_string());
  models::Model back = testing::must(models::open_model(path, kNoTokenizer));
  std::filesystem::remove(path);  // the mapping keeps the bytes alive
  return back;
}

// A synthetic llama with a few hand-made q8_0 corner cases in blk.0.attn_q.weight: an
// all-zero block, a block with one large value among tiny ones, a block of equal values.
models::Model small_llama(uint64_t seed) {
  models::Model m = testing::must(models::open_synthetic("llama-260k", seed));
  HostTensor t = testing::must(m.weights.tensors().at("blk.0.attn_q.weight").contiguous());
  float* p = t.data<float>();
  std::fill(p, p + 32, 0.0f);
  for (int i = 32; i < 64; ++i) p[i] = 1e-4f * static_cast<float>(i - 48);
  p[40] = -3.0f;
  std::fill(p + 64, p + 96, 0.37f);
  m.weights.add("blk.0.attn_q.weight", std::move(t));
  return m;
}

void expect_same_tensor_names(const models::Model& a, const models::Model& b) {
  ASSERT_EQ(a.weights.tensors().size(), b.weights.tensors().size());
  for (const auto& [name, t] : a.weights.tensors()) {
    ASSERT_TRUE(b.weights.has(name)) << name;
    EXPECT_EQ(b.weights.tensors().at(name).shape(), t.shape()) << name;
  }
}

TEST(SyntheticExport, F32KeepsEveryValue) {
  const uint64_t seed = testing::test_seed();
  const models::Model src = small_llama(seed);
  const models::Model back = round_trip(src, DType::kF32, "f32");
  expect_same_tensor_names(src, back);
  for (const auto& [name, t] : src.weights.tensors()) {
    const HostTensor& got = back.weights.tensors().at(name);
    EXPECT_EQ(got.dtype(), DType::kF32) << name;
    EXPECT_EQ(values(got), values(t)) << name << " seed " << seed;
  }
}

TEST(SyntheticExport, F16RoundsMatricesToNearestEvenAndKeepsNormsF32) {
  const uint64_t seed = testing::test_seed();
  const models::Model src = small_llama(seed);
  const models::Model back = round_trip(src, DType::kF16, "f16");
  expect_same_tensor_names(src, back);
  for (const auto& [name, t] : src.weights.tensors()) {
    const HostTensor& got = back.weights.tensors().at(name);
    const std::vector<double> x = values(t), y = values(got);
    EXPECT_EQ(got.dtype(), t.rank() == 1 ? DType::kF32 : DType::kF16) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = t.rank() == 1 ? x[i] : f16_rne(x[i]);
      ASSERT_EQ(y[i], want) << name << "[" << i << "] of " << x[i] << ", seed " << seed;
    }
  }
}

// Checks every q8_0 block of `got` against GGUF's definition applied to `x` in double:
// d = max|x|/127 (a float, stored as f16), q = round(x/d) half away from zero. A value
// within 1e-4 of a rounding tie may land on either side (float vs double quotient).
void expect_q8_0_blocks(const std::string& name, const std::vector<double>& x, const HostTensor& got) {
  ASSERT_EQ(got.dtype(), DType::kQ8_0) << name;
  const auto* blocks = static_cast<const BlockQ8_0*>(got.raw());
  const std::vector<double> y = values(got);
  for (size_t b = 0; b * 32 < x.size(); ++b) {
    double amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const double d = static_cast<float>(amax / 127.0), d16 = f16_rne(d);
    ASSERT_EQ(f16_bits_to_f32(blocks[b].d), d16) << name << " block " << b;
    for (size_t i = 0; i < 32; ++i) {
      const double r = d == 0 ? 0 : x[b * 32 + i] / d;
      const double q = std::copysign(std::floor(std::fabs(r) + 0.5), r);
      const int8_t stored = blocks[b].qs[i];
      const bool tie = std::fabs(std::fabs(r - std::trunc(r)) - 0.5) < 1e-4;
      if (tie) {
        ASSERT_LE(std::fabs(stored - r), 0.5 + 1e-4) << name << " block " << b << " elem " << i;
      } else {
        ASSERT_EQ(stored, q) << name << " block " << b << " elem " << i << " x " << x[b * 32 + i];
      }
      ASSERT_EQ(y[b * 32 + i], d16 * stored) << name;  // and the reader dequantizes it so
      ASSERT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), d / 2 + 127 * std::fabs(d16 - d) + 1e-12) << name;
    }
  }
}

TEST(SyntheticExport, Q8_0QuantizesWholeBlockRowsAndFallsBackToF16) {
  const uint64_t seed = testing::test_seed();
  const models::Model src = small_llama(seed);
  const models::Model back = round_trip(src, DType::kQ8_0, "q8_0");
  expect_same_tensor_names(src, back);
  int quantized = 0, fallback = 0;
  for (const auto& [name, t] : src.weights.tensors()) {
    const HostTensor& got = back.weights.tensors().at(name);
    const std::vector<double> x = values(t);
    if (t.rank() == 1) {
      EXPECT_EQ(got.dtype(), DType::kF32) << name;
      EXPECT_EQ(values(got), x) << name;
    } else if (t.shape().back() % 32 != 0) {  // llama-260k's ffn_down rows hold 172
      ++fallback;
      EXPECT_EQ(got.dtype(), DType::kF16) << name;
      const std::vector<double> y = values(got);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], f16_rne(x[i])) << name << " seed " << seed;
    } else {
      ++quantized;
      expect_q8_0_blocks(name, x, got);
    }
  }
  EXPECT_EQ(fallback, 5);  // one ffn_down per layer
  EXPECT_GT(quantized, 0);
}

TEST(SyntheticExport, NoOuttypeKeepsStoredTypes) {
  const models::Model src = small_llama(testing::test_seed());
  const models::Model q8 = round_trip(src, DType::kQ8_0, "keep_a");
  const models::Model again = round_trip(q8, std::nullopt, "keep_b");
  for (const auto& [name, t] : q8.weights.tensors()) {
    const HostTensor& got = again.weights.tensors().at(name);
    ASSERT_EQ(got.dtype(), t.dtype()) << name;
    ASSERT_EQ(got.nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(got.raw(), t.raw(), t.nbytes()), 0) << name;
  }
}

// ---- a llama.cpp vocabulary on a synthetic model

TEST(SyntheticExport, CarriesALlamaCppVocabulary) {
  const std::optional<std::string> vocab_path = testing::model_file("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  if (!vocab_path) KVF_SKIP_MISSING("ggml-vocab-llama-spm.gguf is missing");
  const load::GgufFile vf = testing::must(load::read_gguf(*vocab_path));
  const load::Vocab want = testing::must(load::vocab_from_gguf(vf));
  ASSERT_EQ(want.size(), 32000);
  models::Model m = testing::must(models::open_synthetic("llama-15m", testing::test_seed()));
  m.tokenizer = testing::must(load::Tokenizer::create(want));
  const std::string path = temp_gguf("vocab");
  models::ExportOptions opts;
  opts.outtype = DType::kQ8_0;
  ASSERT_TRUE(models::export_gguf(m, path, opts).ok());
  const models::Model back = testing::must(models::open_model(path));
  std::filesystem::remove(path);
  ASSERT_NE(back.tokenizer, nullptr);
  const load::Vocab& got = back.tokenizer->vocab();
  EXPECT_EQ(got.pieces, want.pieces);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_EQ(got.types, want.types);
  EXPECT_EQ(std::tie(got.bos, got.eos, got.unk, got.pad), std::tie(want.bos, want.eos, want.unk, want.pad));
  EXPECT_EQ(std::tie(got.add_bos, got.add_eos), std::tie(want.add_bos, want.add_eos));
  EXPECT_EQ(back.tokenizer->encode("Hello world, this is a test", true),
            m.tokenizer->encode("Hello world, this is a test", true));
  EXPECT_EQ(back.config.vocab, 32000);
}

}  // namespace
}  // namespace kvf
