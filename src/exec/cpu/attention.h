// The fused Attention kernel on the CPU (seed 000: "The streaming schedule", "Split-KV
// decode", "Split keys, paged keys and the live length"). One call computes, for every
// batch row b, query head h and query row i:
//   s[t] = transform(q[b,h,i,:] · key(b, h / n_rep, t) * scale) + mask[b,h,i,t]
//   out[b,h,i,:] = sum_t masked_softmax(s)[t] * value(b, h / n_rep, t)
// over keys t < min(len[b], Lk) (all Lk without a live length). transform is identity or
// softcap * tanh(x / softcap). A key whose score is -inf adds exactly zero; a row with no
// visible key gives zeros, as ops::masked_softmax does.
// Dense keys: key(b, g, t) = k[b, g, t, :] (then k_shared[b, 0, t, :]) and value(b, g, t) =
// v[b, g, t, :]. Paged keys: k and v are pools [S, Hkv, d], and key t of row b is pool row
// read[b, t]: key(b, g, t) = k[read[b, t], g, :] (then k_shared[read[b, t], 0, :]),
// value(b, g, t) = v[read[b, t], g, :].
// Nothing is gathered or transposed; schedules, masks and lengths are the dense ones.
// The sums run in one order for every schedule: a row's keys are cut into pieces at
// multiples of kAttentionPiece, each piece is an online softmax from (0, -inf, 0) over
// blocks of 32 keys, and the pieces fold left in key order, (O, M, L) + (o, m, l) with
// M' = max(M, m): O' = O e^(M - M') + o e^(m - M'), L' likewise; out = O / L. So a row's
// output depends on its own keys only, not on the batch, the other query rows of the step
// or the schedule.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "exec/attention_args.h"
#include "core/thread_pool.h"
#include "plan/attention_schedule.h"

namespace kvf::exec::cpu {

inline constexpr int64_t kAttentionPiece = plan::kCpuAttentionPiece;

enum class AttentionScheduleKind { kStreaming, kSplitKV };

struct AttentionSchedule {
  AttentionScheduleKind kind = AttentionScheduleKind::kStreaming;
  int splits = 1;       // split-KV: one task per key piece: ceil(Lk / kAttentionPiece) >= 2
  int64_t chunk = 0;    // split-KV: keys per task, kAttentionPiece
};

// Floats of scratch the schedule needs (0 for streaming): the split-KV partials
// (o[dv], m, l) for every (batch row, query head, split).
size_t attention_scratch_floats(const AttentionArgs& a, const AttentionSchedule& s);

// Runs the kernel on the pool. scratch holds attention_scratch_floats() floats and needs no
// initialization (a split past the live length publishes the neutral (0, -inf, 0)).
void attention(ThreadPool& pool, const AttentionArgs& a, const AttentionSchedule& s, float* scratch);

// The planner's can_implement for this kernel: dtypes, shapes, pointers, widths (key and
// value rows of at most kAttentionMaxWidth floats) and the split-KV parameters. attention()
// assumes the call passed it. With Lq > 1 split-KV keeps partials per query row as well:
// B * Hq * Lq * splits * (dv + 2) floats.
inline constexpr int64_t kAttentionMaxWidth = 1024;
Status attention_check(const AttentionArgs& a, const AttentionSchedule& s);

// The bodies attention() can run; kAuto (or a body this CPU lacks) is the best it supports.
// Tests run each one.
enum class AttentionIsa { kAuto, kPortable, kAvx512 };
bool attention_isa_supported(AttentionIsa isa);
const char* attention_isa_name(AttentionIsa isa);
void attention(ThreadPool& pool, const AttentionArgs& a, const AttentionSchedule& s, float* scratch,
               AttentionIsa isa);

}  // namespace kvf::exec::cpu
