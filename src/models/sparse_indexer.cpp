// DeepSeek-V3.2's sparse-attention indexer (models/sparse_indexer.h).
#include "models/sparse_indexer.h"

#include <cmath>

namespace kvf::models {

using ir::V;
namespace ops = ir::ops;

namespace {

// MLA's rope frequencies over the first qk_rope_dim dims of an indexer head, rotate-half.
ops::RopeSpec indexer_rope(const ModelConfig& cfg) {
  ops::RopeSpec spec = cfg.rope_spec();
  spec.head_dim = cfg.index_head_dim;
  spec.rotary_dim = cfg.qk_rope_dim;
  spec.layout = ops::RopeLayout::kHalf;
  return spec;
}

// [1, H, R n, D] (the step's tokens as one sequence) -> [R, H, n, D].
V by_rows(V x, int64_t rows) {
  if (rows == 1) return x;
  ir::Builder& b = *x.b;
  const int64_t h = x.dim(1), n = x.dim(2) / rows, d = x.dim(3);
  return b.transpose(b.reshape(x, {h, rows, n, d}), {1, 0, 2, 3});
}

V widened(V x) { return x.dtype() == DType::kF32 ? x : x.b->cast(x, DType::kF32); }

}  // namespace

SparseIndexer::SparseIndexer(const ModelConfig& cfg, const Weights& w, const StepSpec& step, const StepTrace& t)
    : cfg_(cfg), w_(w), step_(step), t_(t), rope_(ops::rope_tables(t.pos, indexer_rope(cfg), "indexer_rope_inv_freq")) {}

V SparseIndexer::keys(int64_t layer, V k_new) const {
  if (!step_.cached) return k_new;
  ir::Builder& b = *k_new.b;
  const int64_t d = k_new.dim(3);
  if (!paged(step_)) {
    V cache = b.state(str_cat("index_k.", layer), step_.kv_dtype, {1, 1, step_.capacity, d}, ir::StateRole::kKeyCache,
                      static_cast<int>(layer));
    return widened(ops::write_cache(k_new, cache, t_.pos));
  }
  V pool = b.state(str_cat("index_k_pool.", layer), step_.kv_dtype, {step_.pool_slots, 1, d}, ir::StateRole::kKeyCache,
                   static_cast<int>(layer));
  return widened(ops::pool_view(ops::write_pool(k_new, pool, t_.write), t_.read));
}

V SparseIndexer::mask(int64_t layer, V h, V q_a) const {
  ir::Builder& b = *h.b;
  const int64_t rows = step_.rows, n = step_.n_tokens, heads = cfg_.index_heads, d = cfg_.index_head_dim;
  const std::string p = str_cat("blk.", layer, ".indexer.");
  auto W = [&](const char* name, Shape shape) { return weight(b, w_, p + name, std::move(shape)); };
  V q_flat = ops::linear(q_a, W("attn_q_b.weight", {heads * d, cfg_.q_lora_rank}));
  V q = by_rows(ops::apply_rope(split_heads(q_flat, heads, d), rope_), rows);  // [R, H, n, D]
  V k_flat = ops::layernorm(ops::linear(h, W("attn_k.weight", {d, cfg_.dim})), W("k_norm.weight", {d}),
                            W("k_norm.bias", {d}), 1e-6);
  V k = keys(layer, by_rows(ops::apply_rope(b.reshape(k_flat, {1, 1, rows * n, d}), rope_), rows));  // [R, 1, L, D]
  const int64_t lk = k.dim(2);
  V w = ops::linear(h, W("proj.weight", {heads, cfg_.dim})) * (1.0 / std::sqrt(static_cast<double>(heads)));
  V w_rows = b.reshape(b.transpose(b.reshape(w, {rows, n, heads}), {0, 2, 1}), {rows, heads, n, 1});
  V scores = ops::indexer_scores(q, k, w_rows, 1.0 / std::sqrt(static_cast<double>(d)));  // [R, n, L]
  return ops::selected_mask(ops::block_topk(scores, t_.pos, cfg_.index_topk, 1), t_.pos, lk, 1);
}

}  // namespace kvf::models
