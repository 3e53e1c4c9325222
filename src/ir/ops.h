// ops:: — the compositions model tracers are written in. Each emits primitives only
// (no fused opcodes); compile/ recognizes the chains and plan/ decides how they run.
// Layout convention for attention: q [B, Hq, T, Dk], k [B, Hkv, L, Dk], v [B, Hkv, L, Dv].
#pragma once

#include <string>
#include <vector>

#include "ir/builder.h"

namespace kvf::ir::ops {

// ---- activations (activation.cpp)
V silu(V x);                 // x / (1 + exp(-x))
V sigmoid(V x);              // 1 / (1 + exp(-x))
V relu(V x);                 // max(x, 0)
V gelu_erf(V x);             // 0.5 x (1 + erf(x / sqrt 2))
V gelu_tanh(V x);            // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
V swiglu(V gate, V up);      // silu(gate) * up
V geglu(V gate, V up, bool tanh_form = true);  // gelu(gate) * up
V softcap(V x, double cap);  // cap * tanh(x / cap)
V softmax(V x);              // over the last axis: max-subtract, exp, sum, divide
V masked_softmax(V x);       // softmax, but a row of -inf only (nothing visible) gives zeros, not 0/0

// ---- norms (norm.cpp); weights have the size of the last axis
V rmsnorm(V x, V weight, double eps, bool unit_offset = false);  // unit_offset: x̂ (1 + w), Gemma
V layernorm(V x, V weight, V bias, double eps);                  // bias may be an invalid V

// ---- projections (linear.cpp)
V linear(V x, V weight, V bias = {});  // weight [out, in] as stored by HF: x @ weightᵀ (+ bias)
V embed(V table, V tokens);            // table [vocab, dim], tokens i32 [...] -> [..., dim]

// ---- rotary embeddings (rope.cpp)
// kHalf: rotate-half, pairs (i, i + rot/2), as HF Llama; kInterleaved: adjacent pairs
// (2i, 2i + 1), as llama2.c / GPT-J. The fused Rope op carries the same enum.
using RopeLayout = ir::RopeLayout;
struct RopeSpec {
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // 0: the whole head; else a partial rotary prefix of the head
  double theta = 10000.0;
  RopeLayout layout = RopeLayout::kHalf;
  std::vector<float> inv_freq;  // optional override (scaled ropes); else theta^(-2i/rot)
};
std::vector<float> rope_inv_freq(const RopeSpec& spec);
struct RopeTables {
  V cos, sin;  // [T, rot/2] (kHalf) or [T, rot/2, 1] (kInterleaved)
  RopeLayout layout = RopeLayout::kHalf;
  int64_t rotary_dim = 0;
};
// Angles pos * inv_freq for the step's positions; build once per graph, apply per layer.
RopeTables rope_tables(V pos, const RopeSpec& spec, const std::string& name = "rope_inv_freq");
V apply_rope(V x, const RopeTables& t);  // x [B, H, T, D]

// ---- masks (mask.cpp): additive f32 [R, 1, n, Lk], 0 where visible and -inf elsewhere.
// keys i32 [R, Lk] holds the position of every key column: key_positions() (0..Lk-1, one
// row shared by every query), or a paged step's per-row Slot::kKeyPos. pos is [R * n].
V key_positions(Builder& b, int64_t lk);  // iota [1, Lk]
// What a query sees besides causality: the last `window` positions (0: all of them), plus
// the first `sinks` positions whatever the window (StreamingLLM's attention sinks).
struct KeySpan {
  int64_t window = 0;
  int64_t sinks = 0;
};
// Key k visible to query t iff k <= pos[t] and k lies in every span.
V span_mask(V pos, V keys, const std::vector<KeySpan>& spans);
V causal_mask(V pos, int64_t lk);                         // k <= pos[t], over key_positions
V sliding_window_mask(V pos, int64_t lk, int64_t window); // pos[t] - window < k <= pos[t]
std::vector<float> alibi_slopes(int64_t n_heads);         // the ALiBi paper's geometric slopes
V alibi_bias(Builder& b, const std::vector<float>& slopes, V keys,
             const std::string& name = "alibi_slopes");   // [R, H, 1, Lk]: slope_h * keys
V alibi_bias(Builder& b, const std::vector<float>& slopes, int64_t lk,
             const std::string& name = "alibi_slopes");   // over key_positions

// Selected attention's mask: selected [R, n, NB] pred (block_topk) over blocks of `ratio`
// key positions -> additive [R, 1, n, Lk]: key t visible to query i iff t <= pos[i] and t's
// block is selected or is i's own block while unfinished (its last position past pos[i]).
V selected_mask(V selected, V pos, int64_t lk, int64_t ratio);
// ---- ranking and block selection (selection.cpp)
// Each entry's place along the last axis of scores: how many entries (only those `among`
// holds, a pred of scores' shape, when given) score above it, or the same at a lower index.
// As a pred: place < k. Ties go to the lower index.
V rank_below(V scores, int64_t k, V among = {});
V block_last_positions(Builder& b, int64_t n_blocks, int64_t ratio);  // i32 [1, NB]: j ratio + ratio - 1
// pred [R * n, NB]: each block's last position `dir` pos (kLe: the block is complete).
V blocks_against(V pos, int64_t n_blocks, int64_t ratio, CmpDir dir);
// A sparse-attention selection: scores [R, n, NB] f32 (each query's score for each block of
// `ratio` key positions), pos [R * n] the queries' positions -> pred [R, n, NB]: the K best
// complete blocks (all positions <= pos) of each query, ties to the lower block; all of them
// when fewer than K are complete. Ratio 1 is a token-level top-k over the causal keys
// (DeepSeek-V3.2's indexer).
V block_topk(V scores, V pos, int64_t k, int64_t ratio);
// A lightning indexer's scores (DeepSeek-V3.2): q [R, H, n, D] (H heads), the keys k
// [R, 1, L, D], the per-head weights w [R, H, n, 1] -> [R, n, L]:
//   score[r, i, t] = Σ_h w[r, h, i] · relu(scale · q[r, h, i] · k[r, t])
// as one product of every head's rows against the keys, relu, then the weighted head sum.
V indexer_scores(V q, V k, V w, double scale);
// ---- attention (attention.cpp)
struct AttnOpts {
  double scale = 1.0;    // usually 1/sqrt(Dk)
  double softcap = 0.0;  // 0: none; else cap * tanh(score / cap) before the mask
};
V repeat_kv(V x, int64_t n_rep);  // [B, Hkv, L, D] -> [B, Hkv * n_rep, L, D]
// The seed's chain over given keys/values: repeat_kv, q·kᵀ, scale, softcap, + mask,
// masked_softmax (a row that sees no key gives zeros), ·v.
// mask is [B|1, Hq|1, T, L] or an invalid V for none.
V attention_prefill(V q, V k, V v, V mask, const AttnOpts& opts);
// Writes k_new/v_new [B, Hkv, T, D] into the caches [B, Hkv, cap, D] at pos[0] by
// DynamicUpdateSlice (donating the state), then attends over the whole cache with mask.
struct CachedAttention { V out, k_cache, v_cache; };
CachedAttention attention_masked(V q, V k_new, V v_new, V k_cache, V v_cache, V pos, V mask,
                                 const AttnOpts& opts);
// attention_masked's cache writes, then attention_live over the live prefix of the cache,
// len = pos[T-1] + 1 (guarded to 1..cap): a decode step visits what it needs, not the
// capacity, once compile/ fuses it. The mask still orders the tokens within the step.
CachedAttention attention_cached(V q, V k_new, V v_new, V k_cache, V v_cache, V pos, V mask,
                                 const AttnOpts& opts);
// The paged form: k_new/v_new [B, Hkv, T, D] are written through `write` [B*T] (token ->
// pool slot, -1 writes nothing) into the pools [S, Hkv, D] by ScatterUpdate (donating the
// state), then each row b attends over its logical positions 0..len[b]-1 read through
// `read` [B, cap] (column -> pool slot), len[b] = pos[b, T-1] + 1. pos is [B, T]: a row
// shorter than T repeats its last token and position (and writes nothing for the copies).
// Each row's keys are the gathered view transpose(gather(pool, read), (0,2,1,3)); when read
// is a read-map slot declared over the pools' rows, compile/ fuses the chain into the
// paged-key form, which reads the pools in place through read (docs/attention.md).
struct PagedAttention { V out, k_pool, v_pool; };
// With key_pos [B, cap] (the position each read column holds, increasing, larger than any
// query past the row's last column) the read map is compact: it may skip positions (blocks
// freed behind a window), and len[b] counts the columns at or before pos[b, T-1].
PagedAttention attention_paged(V q, V k_new, V v_new, V k_pool, V v_pool, V write, V read, V pos, V mask,
                               const AttnOpts& opts, V key_pos = {});
// MLA's latent cache (docs/kv.md, "MLA latent cache"): one key head whose key is [c | k_rot]
// and whose value is c itself, so a cache row holds r + rot elements and nothing twice.
// c_new [B, 1, T, r] and r_new [B, 1, T, rot] are written like attention_cached's k/v into
// the caches [B, 1, cap, r] and [B, 1, cap, rot]; q [B, H, T, r + rot] then attends with
// key concat(c, k_rot) and value c (MQA, n_rep = H). The result's k_cache/v_cache are the
// written c and k_rot caches. compile/ fuses the chain into the split-key form (k = c,
// k_shared = k_rot, v = c), so the joined key is never built.
CachedAttention attention_latent(V q, V c_new, V r_new, V c_cache, V r_cache, V pos, V mask, const AttnOpts& opts);
// The same over pools [S, 1, r] and [S, 1, rot] with attention_paged's maps; the result's
// k_pool/v_pool are the written c and k_rot pools. Fused into the paged split-key form.
PagedAttention attention_latent_paged(V q, V c_new, V r_new, V c_pool, V r_pool, V write, V read, V pos, V mask,
                                      const AttnOpts& opts, V key_pos = {});
// One cache's write and read as the attention forms above do them, for per-layer state
// beside K/V (a sparse-attention indexer's keys). x_new [B, H, T, D] is rounded into the
// cache's dtype and written into cache [B, H, cap, D] at pos[0] (donating it) ...
V write_cache(V x_new, V cache, V pos);
// ... or scattered into pool [S, H, D] through write [B*T] (-1 writes nothing; donating it).
V write_pool(V x_new, V pool, V write);
// Row b's logical positions of pool [S, H, D] read through read [B, cap]: [B, H, cap, D].
V pool_view(V pool, V read);
// Clamps x into [lo, hi] and declares the witness lo <= x <= hi as a validation output.
V index_guard(V x, int64_t lo, int64_t hi, const std::string& what);
// Attends over the first len[b] keys of each row (len i32 [B], 1 <= len <= L, guarded):
// inactive key/value rows are selected to 0 and inactive scores to -inf.
V attention_live(V q, V k, V v, V len, V mask, const AttnOpts& opts);

}  // namespace kvf::ir::ops
