// MLA's latent cache (docs/kv.md, "MLA latent cache"): a cached DeepSeek-V2 step keeps only
// the normed latent c and the roped k_rot, kv_lora_rank + qk_rope_dim elements per token and
// layer, and attends in the absorbed form. The caches and pools hold exactly the latent
// bill; the compiled decode has one split-key Attention per layer over one latent head; and
// on a DeepSeek-V2-Lite-shaped attention the absorbed cached decode equals the decompressed
// full forward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compile/passes.h"
#include "compile/pipeline.h"
#include "llm/driver.h"
#include "llm/generator.h"
#include "llm/step_runner.h"
#include "models/model.h"
#include "testing.h"

namespace kvf {
namespace {

int64_t elem_bytes(DType kv) { return kv == DType::kF16 ? 2 : 4; }

// What per-head K/V of the same model would hold per token: layers · H · (nope + rot + dv).
int64_t expanded_bytes_per_token(const models::ModelConfig& c, int64_t elem) {
  return c.n_layers * c.n_heads * (c.qk_nope_dim + c.qk_rope_dim + c.v_head_dim) * elem;
}

// DeepSeek-V2-Lite's attention geometry (16 heads, kv_lora_rank 512, rope 64, nope 128,
// v 128, no q compression) behind a narrow residual stream, 2 layers, a small vocabulary
// and seeded uniform weights: the real model's cache shapes at a size a test can run.
models::Model lite_shaped(uint64_t seed) {
  models::ModelConfig c;
  c.arch = "deepseek2";
  c.vocab = 96;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = c.n_kv_heads = 16;
  c.kv_lora_rank = 512;
  c.qk_nope_dim = 128;
  c.qk_rope_dim = 64;
  c.v_head_dim = 128;
  c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
  c.hidden_dim = 96;
  c.context = 128;
  c.rope_layout = ir::ops::RopeLayout::kInterleaved;
  const int64_t h = c.n_heads, r = c.kv_lora_rank, rot = c.qk_rope_dim, dk = c.head_dim, dv = c.v_head_dim;
  std::vector<std::pair<std::string, Shape>> shapes{{"token_embd.weight", {c.vocab, c.dim}},
                                                    {"output_norm.weight", {c.dim}},
                                                    {"output.weight", {c.vocab, c.dim}}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = str_cat("blk.", l, ".");
    shapes.insert(shapes.end(), {{p + "attn_norm.weight", {c.dim}},
                                 {p + "attn_q.weight", {h * dk, c.dim}},
                                 {p + "attn_kv_a_mqa.weight", {r + rot, c.dim}},
                                 {p + "attn_kv_a_norm.weight", {r}},
                                 {p + "attn_kv_b.weight", {h * (c.qk_nope_dim + dv), r}},
                                 {p + "attn_output.weight", {c.dim, h * dv}},
                                 {p + "ffn_norm.weight", {c.dim}},
                                 {p + "ffn_gate.weight", {c.hidden_dim, c.dim}},
                                 {p + "ffn_up.weight", {c.hidden_dim, c.dim}},
                                 {p + "ffn_down.weight", {c.dim, c.hidden_dim}}});
  }
  std::mt19937_64 rng(seed);
  models::Model m;
  for (const auto& [name, shape] : shapes) {
    const bool norm = name.find("norm") != std::string::npos;
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    std::uniform_real_distribution<float> u(norm ? 0.8f : static_cast<float>(-bound), norm ? 1.2f : static_cast<float>(bound));
    std::vector<float> values(static_cast<size_t>(testing::must(checked_numel(shape))));
    for (float& v : values) v = u(rng);
    m.weights.add(name, testing::must(HostTensor::from_f32(shape, values)));
  }
  m.config = c;
  m.trace = testing::must(models::family_tracer("deepseek2"));
  m.source = "lite-shaped";
  return m;
}

models::Model fixture() { return testing::open_test_model("deepseek_v2"); }

// The caches a contiguous Generator allocates hold exactly the latent bill of its capacity.
void expect_contiguous_bill(const models::Model& m, DType kv) {
  SCOPED_TRACE(str_cat(m.source, " kv ", dtype_name(kv)));
  const models::ModelConfig& c = m.config;
  const int64_t cap = 32, elem = elem_bytes(kv);
  llm::Generator gen(m, cap, {.executor = llm::ExecutorKind::kCpu, .precision = eval::Precision::kNative, .threads = 2,
                              .last_logits = true, .kv_dtype = kv, .skip_passes = {}});
  ASSERT_TRUE(gen.step({1, 2, 3}).ok());
  EXPECT_EQ(models::kv_bill_bytes(c, 1, elem), c.n_layers * (c.kv_lora_rank + c.qk_rope_dim) * elem);
  EXPECT_EQ(gen.state_bytes(), models::kv_bill_bytes(c, cap, elem));
  std::printf("[ latent   ] %s kv %s: %lld B/token held (bill %lld), per-head K/V would be %lld B/token\n",
              m.source.c_str(), std::string(dtype_name(kv)).c_str(), static_cast<long long>(gen.state_bytes() / cap),
              static_cast<long long>(models::kv_bill_bytes(c, 1, elem)),
              static_cast<long long>(expanded_bytes_per_token(c, elem)));
}

TEST(MlaLatent, ContiguousCachesHoldTheLatentBill) {
  const models::Model f = fixture();
  const models::Model lite = lite_shaped(testing::test_seed());
  for (DType kv : {DType::kF32, DType::kF16}) {
    expect_contiguous_bill(f, kv);
    expect_contiguous_bill(lite, kv);
  }
  // The fixture: 2 layers · (32 + 8) · 4 B, against 2 · 4 heads · (16 + 8 + 24) · 4 B expanded.
  EXPECT_EQ(models::kv_bill_bytes(f.config, 1, 4), 320);
  EXPECT_EQ(expanded_bytes_per_token(f.config, 4), 1536);
}

TEST(MlaLatent, PagedPoolsHoldTheLatentBill) {
  const models::Model m = fixture();
  for (DType kv : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(kv));
    llm::DriverOptions o;
    o.pool_blocks = 6;
    o.max_seq_len = 64;
    o.kv_dtype = kv;
    o.threads = 2;
    llm::Driver driver(m, o);
    const llm::Opened opened = testing::must(driver.open({5, 6, 7, 8, 9}, 4, {}));
    ASSERT_TRUE(opened.seq.has_value());
    ASSERT_TRUE(driver.step({{*opened.seq, 5}}).ok());
    EXPECT_EQ(driver.state_bytes(), models::kv_bill_bytes(m.config, 6 * llm::kv::kBlockTokens, elem_bytes(kv)));
  }
}

// One split-key Attention per layer, MQA over the latent head (n_rep = H), whose key and
// value are the same written c cache and whose shared key is the written k_rot cache; the
// graph's state is those two per layer, r and rot wide.
void expect_latent_decode(const models::Model& m, const models::StepSpec& spec) {
  const ir::Graph traced = testing::must(m.trace_step(spec));
  const compile::Compiled c = testing::must(compile::run_passes(traced, compile::default_passes()));
  const ir::Graph& g = c.graph;
  SCOPED_TRACE(g.name);
  const models::ModelConfig& cfg = m.config;
  const std::vector<const ir::Eqn*> att = testing::find_eqns(g, ir::OpKind::kAttention);
  ASSERT_EQ(static_cast<int64_t>(att.size()), cfg.n_layers);
  for (const ir::Eqn* e : att) {
    const ir::AttnParams& p = e->params.attn;
    EXPECT_EQ(p.n_rep, cfg.n_heads);
    EXPECT_TRUE(p.has_shared);
    EXPECT_EQ(p.has_read, models::paged(spec));
    EXPECT_EQ(e->in[1], e->in[2]) << "the value is the key's latent part, read once";
    EXPECT_EQ(g.type(e->in[1]).shape.back(), cfg.kv_lora_rank);
    EXPECT_EQ(g.type(e->in[3]).shape.back(), cfg.qk_rope_dim);
    EXPECT_EQ(g.type(e->in[1]).dtype, spec.kv_dtype);
  }
  int64_t states = 0, elems_per_slot = 0;
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kState) continue;
    ++states;
    elems_per_slot += v.type.shape.back();
  }
  EXPECT_EQ(states, 2 * cfg.n_layers);
  EXPECT_EQ(elems_per_slot, cfg.n_layers * (cfg.kv_lora_rank + cfg.qk_rope_dim));
}

TEST(MlaLatent, DecodeHasOneLatentAttentionPerLayer) {
  const models::Model f = fixture();
  const models::Model lite = lite_shaped(testing::test_seed());
  for (const models::Model* m : {&f, &lite}) {
    for (DType kv : {DType::kF32, DType::kF16}) {
      expect_latent_decode(*m, {.n_tokens = 1, .capacity = 48, .cached = true, .last_logits = true, .kv_dtype = kv});
      expect_latent_decode(*m, {.n_tokens = 1, .capacity = 48, .cached = true, .last_logits = true, .kv_dtype = kv,
                                .pool_slots = 160, .rows = 3});
    }
  }
}

// The absorbed cached decode against the decompressed full forward, at the real model's
// latent width (512) and head count: the scores are the same sums in another order.
TEST(MlaLatent, LiteShapedCachedDecodeEqualsFullForward) {
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(str_cat("seed ", seed));
  std::mt19937_64 rng(seed);
  const models::Model m = lite_shaped(seed);
  const int64_t n = 24, vocab = m.config.vocab;
  const std::vector<int32_t> ids = testing::random_ids(rng, n, vocab);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  llm::StepRunner full(m, {.executor = llm::ExecutorKind::kCpu, .precision = eval::Precision::kNative, .threads = 2,
                           .skip_passes = {}});
  const std::span<const float> want = testing::must(
      full.run({.n_tokens = n, .capacity = 0, .cached = false}, {{ir::Slot::kToken, ids}, {ir::Slot::kPos, pos}}));
  for (DType kv : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(dtype_name(kv));
    llm::Generator gen(m, n, {.executor = llm::ExecutorKind::kCpu, .precision = eval::Precision::kNative,
                              .threads = 2, .last_logits = false, .kv_dtype = kv, .skip_passes = {}});
    std::vector<double> got, ref;
    for (int64_t p = 0; p < n; ++p) {
      const std::vector<float> row = testing::must(gen.step({ids[static_cast<size_t>(p)]}));
      got.insert(got.end(), row.begin(), row.end());
    }
    ref.assign(want.begin(), want.end());
    const double rel = testing::rel_error(got, ref);
    std::printf("[ latent   ] lite-shaped kv %s: cached vs full rel %.2e\n", std::string(dtype_name(kv)).c_str(), rel);
    EXPECT_LE(rel, kv == DType::kF16 ? 1e-3 : 1e-5);
  }
}

}  // namespace
}  // namespace kvf
