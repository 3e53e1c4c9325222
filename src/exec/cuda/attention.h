// The CUDA attention kernels' host API (plain C++: no CUDA headers, includable from any
// translation unit). Decode: split-KV (Flash-Decoding) over a contiguous or paged KV cache,
// GQA served once per KV head, live length per batch row; prefill over a varlen batch
// (below). See docs/cuda.md.
//
// For every batch row b, query head h and query row i (of Lq):
//   s[t]  = transform(q[b,h,i,:] . key(b, h / n_rep, t) * scale) + alibi[h] * (t - p_i) + mask[b, t]
//   out[b,h,i,:] = sum_t softmax(s)[t] * value(b, h / n_rep, t)
// over the keys t visible to row i: t <= p_i = len[b] - Lq + i (the query rows are the last
// Lq positions of the row: Lq = 1 is plain decode, Lq > 1 a speculative verify, causal
// among themselves), and with a window W > 0 also t > p_i - W. transform is the identity or
// softcap * tanh(x / softcap). A row with no visible key gets zeros (not 0/0).
// Dense keys: key(b, g, t) = k[b, g, t, :], value(b, g, t) = v[b, g, t, :] ([B, Hkv, cap, d]).
// Paged keys: k and v are pools [slots, Hkv, d] and key t of row b is pool row
// read_map[b * map_stride + t] (block tables expanded; any page size, 1 included); or, with
// map_positions, dense keys through the map: key(b, g, t) = k[b, g, read_map[b * map_stride + t], :].
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace kvf::exec::cuda {

enum class KvType { kBF16, kF16 };

// Which decode kernel: the tensor-core one (head dims 64 and 128: mma.sync over the group's
// query rows, q and P split into 16-bit high and low parts) or the SIMT one (every head dim).
// kAuto takes the tensor cores where they have an instantiation.
enum class DecodeKernel { kAuto, kSimt, kTensorCores };

struct DecodeAttentionArgs {
  KvType kv_type = KvType::kBF16;
  int batch = 1, q_heads = 1, kv_heads = 1, lq = 1;
  int dk = 128, dv = 128;          // (64,64) (128,128) (256,256) (192,128)
  const float* q = nullptr;        // device f32 [B, Hq, Lq, dk]
  const void* k = nullptr;         // device bf16/f16 [B, Hkv, cap, dk] or pool [slots, Hkv, dk]
  const void* v = nullptr;         // device bf16/f16 [B, Hkv, cap, dv] or pool [slots, Hkv, dv]
  int capacity = 0;                // dense (map_positions too): cap (keys per row); paged: unused
  const int32_t* read_map = nullptr;  // device i32 [B, map_stride]; null: dense keys
  int map_stride = 0;              // paged: entries per row of read_map (>= every len)
  // read_map lists positions of a dense cache ([B, Hkv, capacity, d], capacity set) instead
  // of pool rows: key t of row b is k[b, g, read_map[b * map_stride + t]], so a row reads any
  // of its cache's keys in any order (a context-parallel rank's share).
  bool map_positions = false;
  const int32_t* lens = nullptr;   // device i32 [B], each in [0, capacity or map_stride]
  int max_len = 0;                 // host bound on every len[b]: sizes the splits
  float scale = 1.0f;
  float softcap = 0.0f;            // 0: none
  const float* alibi = nullptr;    // device f32 [Hq] slopes or null
  int window = 0;                  // 0: none
  // Lq 1 only: an additive mask over each row's keys, s[t] += mask[b * mask_stride + t]
  // (-inf hides the key; mask_stride 0: one mask for every row).
  const float* mask = nullptr;     // device f32 [B or 1, map_stride or capacity] or null
  int mask_stride = 0;
  float* out = nullptr;            // device f32 [B, Hq, Lq, dv]
  // Or null: each output row's softmax state (m, l), m its largest score in log2 units
  // (s·log2 e) and l = Σ_t 2^(s[t]·log2 e − m), its log-sum-exp (m + log2 l)·ln 2; (-inf, 0)
  // for a row that sees no key. Decodes over disjoint shares of the keys then merge exactly
  // (merge_attention_partials): context parallelism. A pair, not the log-sum-exp itself:
  // one f32 of a sum near 20 is 2e-6 off, and each share's weight with it.
  float* ml = nullptr;             // device f32 [B, Hq, Lq, 2]
  int num_splits = 0;              // 0: chosen from max_len and the SM count
  // false: split s takes keys [s * chunk, (s + 1) * chunk) of every row, chunk sized from
  // max_len. true: each row's own length is divided among the splits (chunks of at least
  // 128 keys), so that a plan made once for the longest row (a captured CUDA graph, where
  // max_len is the capacity) still spreads a short row's keys over the SMs.
  bool chunks_from_lens = false;
  DecodeKernel kernel = DecodeKernel::kAuto;
  // Launch as a programmatic dependent (PDL) of the kernel in front on the stream: the decode
  // waits for it on the device instead of at the launch, and lets the next kernel start early.
  bool programmatic = false;
  // With programmatic, the keys the kernel in front writes, where that kernel writes nothing
  // else the decode reads but q and waited for every kernel before it: a dense cache's rows
  // from *keys_written_from on (a device i32 [1]: its cache write's start), or a pool's rows
  // written_slots[0..written_slot_count) (device i32, at most kMaxWrittenSlots). The
  // tensor-core kernel then starts loading the other keys before it waits; with neither it
  // waits first.
  const int32_t* keys_written_from = nullptr;
  const int32_t* written_slots = nullptr;
  int written_slot_count = 0;
  static constexpr int kMaxWrittenSlots = 64;
};

// What decode_attention() will launch: splits of `chunk` keys, query rows handled `rows`
// at a time per block, and the scratch it needs for the split partials.
struct DecodePlan {
  bool tensor_cores = false;  // the kernel chosen (DecodeKernel)
  int splits = 1;
  int chunk = 0;
  int rows = 1;          // query rows per block (SIMT: n_rep * Lq rounded up to 1, 2, 4 or 8; tensor cores: 16)
  int row_blocks = 1;    // blocks per (b, kv head, split) over the n_rep * Lq rows
  size_t workspace_bytes = 0;
  size_t counter_bytes = 0;  // the workspace's first bytes: split arrival counters (see decode_attention)
};

// can_implement + the schedule: refuses unsupported shapes with kUnsupported and bad
// arguments with kInvalidInput. Queries the current device's SM count once.
Result<DecodePlan> plan_decode_attention(const DecodeAttentionArgs& a);

// Launches on `stream` (a cudaStream_t, or null for the default stream): one kernel, whose
// last block per (row, KV head) merges the split partials. workspace is device memory of at
// least plan.workspace_bytes, 16-byte aligned. Its first plan.counter_bytes are arrival
// counters: zero them once before the workspace's first decode (prepare_decode_workspace);
// every decode leaves them zero, so a workspace kept across decodes (and CUDA graph
// replays) needs nothing more. The rest needs no initialization. One decode at a time per
// workspace.
Status decode_attention(const DecodeAttentionArgs& a, const DecodePlan& plan, void* workspace,
                        void* stream = nullptr);

// Zeroes the workspace's arrival counters (plan.counter_bytes) on `stream`: once per
// workspace, before its first decode.
Status prepare_decode_workspace(const DecodePlan& plan, void* workspace, void* stream = nullptr);

// ---- Merging partial attentions (partials_merge.cu) ----
// `parts` attentions of the same `rows` query rows, each over its own share of the keys
// (a context-parallel rank's, a split's): o [parts, rows, dv], each row normalized over its
// share, and ml [parts, rows, 2], decode_attention's softmax states. For every row, with
// M = max_r m_r and w_r = 2^(m_r − M)·l_r:
//   out = Σ_r w_r o_r / Σ_r w_r
// the attention over all the shares' keys; out_ml (or null) gets (M, Σ_r w_r), so merged
// rows merge again. A part with l = 0 adds nothing, whatever its o holds; a row whose every
// part has is zeros with (-inf, 0). The arithmetic of exec/cpu/attention_merge.h, in the
// kernel's log2 units.
struct PartialsMergeArgs {
  int parts = 1, rows = 0, dv = 64;
  const float* o = nullptr;          // device f32 [parts, rows, dv]
  const float* ml = nullptr;         // device f32 [parts, rows, 2]
  float* out = nullptr;              // device f32 [rows, dv]; may not overlap o
  float* out_ml = nullptr;           // device f32 [rows, 2] or null
  // Floats from one part's o (ml) to the next's; 0: packed, rows * dv (rows * 2). A rank's o
  // and ml side by side, [parts][rows * dv + rows * 2], gather as one block.
  int64_t o_stride = 0, ml_stride = 0;
};

// kInvalidInput for bad shapes or pointers; then one launch on `stream`.
Status merge_attention_partials(const PartialsMergeArgs& a, void* stream = nullptr);

// ---- Prefill (prefill_attention.cpp, prefill_attention.cuh) ----
// Variable-length batches packed along tokens: sequence b has query rows
// [cu_seqlens_q[b], cu_seqlens_q[b+1]) and keys [cu_seqlens_k[b], cu_seqlens_k[b+1]).
// For its query row i (of lq), at key position p_i = i + (lk - lq) (bottom-right aligned:
// with lk > lq the rows are the last lq positions, as in chunked prefill), and head h:
//   s[j] = transform(q[i,h,:] . k[j,h/n_rep,:] * scale) + alibi[h] * (j - p_i)
//   out[i,h,:] = sum_j softmax(s)[j] v[j,h/n_rep,:]
// over keys j < lk, with causal also j <= p_i, and with a window W > 0 also j > p_i - W;
// transform is the identity or softcap * tanh(x / softcap). A row that sees no key
// (causal with lq > lk, lk = 0, ...) gets zeros. Q, K, V and out are 16-bit (kv_type),
// accumulation is f32 on the tensor cores.
// Which prefill kernel: Hopper's warpgroup MMA and TMA (every head dim on an sm_90 device,
// total_q and total_k given, no softcap/ALiBi/window: 128-row blocks of two consumer
// warpgroups) or mma.sync (everything, any sm_90+ device). kAuto takes wgmma where it runs.
enum class PrefillKernel { kAuto, kMmaSync, kWgmma };

struct PrefillAttentionArgs {
  KvType kv_type = KvType::kBF16;  // of q, k, v and out
  int batch = 1, q_heads = 1, kv_heads = 1;
  int head_dim = 128;                  // 64, 128 or 256
  const void* q = nullptr;             // device [total_q, Hq, head_dim]
  const void* k = nullptr;             // device [total_k, Hkv, head_dim]
  const void* v = nullptr;             // device [total_k, Hkv, head_dim]
  void* out = nullptr;                 // device [total_q, Hq, head_dim]
  const int32_t* cu_seqlens_q = nullptr;  // device i32 [batch + 1], from 0, non-decreasing
  const int32_t* cu_seqlens_k = nullptr;  // device i32 [batch + 1], from 0, non-decreasing
  int max_seqlen_q = 0;                // host bound on every query length: sizes the grid
  int total_q = 0, total_k = 0;        // rows of q/out and of k/v (cu_seqlens_*[batch]); the wgmma
                                       // kernel's TMA needs them, 0 (unknown) keeps kAuto on mma.sync
  float scale = 1.0f;
  bool causal = false;
  float softcap = 0.0f;                // 0: none
  const float* alibi = nullptr;        // device f32 [Hq] slopes or null
  int window = 0;                      // 0: none
  PrefillKernel kernel = PrefillKernel::kAuto;
};

// can_implement: kUnsupported for other head dims, grid limits, or kWgmma where it cannot
// run; kInvalidInput for bad shapes or missing pointers. Needs no workspace.
Status check_prefill_attention(const PrefillAttentionArgs& a);

// The kernel prefill_attention(a) runs (kMmaSync or kWgmma), after the checks pass.
PrefillKernel prefill_kernel_for(const PrefillAttentionArgs& a);

// Checks, then launches on `stream` (a cudaStream_t, or null for the default stream).
Status prefill_attention(const PrefillAttentionArgs& a, void* stream = nullptr);

// A step's causal prefill over its cache (exec/cuda/step), on the mma.sync kernel: q and out
// f32 [batch, Hq, lq, head_dim], K/V the dense 16-bit cache [batch, Hkv, cap, head_dim] of
// which row b's first lens[b] keys are live; query row i of row b sees the live keys
// t <= pos[b * lq + i]. q and the probabilities are rounded to kv_type; f32 accumulation.
struct StepPrefillArgs {
  KvType kv_type = KvType::kF16;
  int batch = 1, q_heads = 1, kv_heads = 1;
  int head_dim = 64;  // 64, 128 or 256
  int lq = 0, cap = 0;
  const float* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  float* out = nullptr;
  const int32_t* lens = nullptr;  // device i32 [batch]
  const int32_t* pos = nullptr;   // device i32 [batch * lq]
  float scale = 1.0f, softcap = 0.0f;
};

// kUnsupported for a head dim without a kernel; kInvalidInput for bad shapes or pointers.
Status check_step_prefill_attention(const StepPrefillArgs& a);
// Launches on `stream` (checked when the step is bound, not here: it runs inside a graph).
Status step_prefill_attention(const StepPrefillArgs& a, void* stream = nullptr);

}  // namespace kvf::exec::cuda
