// DeepSeek-V3.2's sparse-attention indexer (the "lightning indexer" of DeepSeek Sparse
// Attention), traced from primitives so that the oracle defines it. Per layer it has its own
// query heads (indexer.attn_q_b over MLA's normed q_a), one key (indexer.attn_k, a biased
// LayerNorm, rope on its first qk_rope_dim dims in the rotate-half layout, where MLA's rope
// rotates adjacent pairs) and per-head weights (indexer.proj):
//   score[s, t] = Σ_h w[s, h] · H^-1/2 · relu(D^-1/2 · q[s, h] · k[t])
// Each query keeps its index_topk best keys at or before its own position (all of them while
// it has fewer: ops::block_topk with blocks of one position), and MLA attends to those alone.
// Cached steps keep the indexer's keys as a state of their own beside the latent, per layer
// index_k.L [1, 1, capacity, D] (paged: the pool index_k_pool.L [pool_slots, 1, D]), so that
// prefix caching and preemption carry them like K/V.
#pragma once

#include "models/family.h"

namespace kvf::models {

class SparseIndexer {
 public:
  SparseIndexer(const ModelConfig& cfg, const Weights& w, const StepSpec& step, const StepTrace& t);
  // Layer `layer`'s selection as an additive mask [R, 1, n, keys_seen] (0 on the keys each
  // query keeps, -inf elsewhere), from the layer's normed hidden rows h [1, R n, dim] and
  // MLA's normed query latent q_a [1, R n, q_lora_rank]. Add it to the step's mask.
  ir::V mask(int64_t layer, ir::V h, ir::V q_a) const;

 private:
  ir::V keys(int64_t layer, ir::V k_new) const;  // [R, 1, keys_seen, D]: this step's and the cached

  const ModelConfig& cfg_;
  const Weights& w_;
  const StepSpec& step_;
  const StepTrace& t_;
  ir::ops::RopeTables rope_;
};

}  // namespace kvf::models
