// Partial attention and its exact merge, the arithmetic of context parallelism: one query
// row's attention over a subset of its keys, as a normalized output and its log-sum-exp
// (what a rank holding those keys computes), and the merge of such partials into the row's
// attention over all of them. Plain loops, for correctness, not speed: the fast kernel is
// exec/cpu/attention.h (its split-KV combine is this merge), the GPU's exec/cuda/decode_merge.cuh
// and, over ranks, exec/cuda/partials_merge.cu.
#pragma once

#include <cstdint>
#include <span>

#include "exec/cpu/attention.h"

namespace kvf::exec::cpu {

// Query row i of query head h of batch row b (of the call `a` describes) over the keys
// `keys` only: positions t < a.lk of the row (any order, none twice), scored exactly as the
// kernel scores them (attention.h: dense or paged, split key, scale, softcap, mask; the live
// length is the caller's: pass only keys below it). Writes o [a.dv], the softmax-weighted
// values normalized over these keys, and returns lse = log Σ_t e^(s[t]). Keys whose score is
// -inf add nothing; with no such key left, o = 0 and lse = -inf (a rank with nothing to add).
// Sums run in f64.
float partial_attention(const AttentionArgs& a, int64_t b, int64_t h, int64_t i, std::span<const int64_t> keys,
                        float* o);

// Merges `parts` partials of one row, o [parts, dv] and lse [parts], into out [dv]: with
// M = max lse, out = Σ e^(lse_r - M) o_r / Σ e^(lse_r - M), the (O, M, L) combine of the CPU
// kernel's pieces written for normalized partials. A part with lse = -inf adds nothing;
// when every part has, out is zeros and lse -inf, as the kernel gives a row that sees no key.
// Returns the merged lse, M + log Σ e^(lse_r - M), so merged rows merge again (a tree).
float merge_partials(int64_t parts, int64_t dv, const float* o, const float* lse, float* out);

}  // namespace kvf::exec::cpu
