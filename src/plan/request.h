// Kernel requests (DESIGN.md §3): what the planner asks a device to run for one eqn.
// The attention request names the shape, the score transform, the mask kind, the key bound
// and the schedule, so a backend generates (or picks) one kernel from it and nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "ir/graph.h"
#include "plan/moe_schedule.h"

namespace kvf::plan {

enum class AttentionSchedule : uint8_t {
  kStreaming,  // one task per (row, key head, query tile); lanes stride over the keys
  kSplitKV,    // Flash-Decoding: partials (o, m, l) per key chunk, then a combine
  kTiles,      // GPU prefill: query tiles against key tiles on the tensor cores (16-bit q and p)
};
enum class MaskKind : uint8_t { kNone, kShared, kPerHead };  // kPerHead: ALiBi-style [.., Hq, ..]

struct AttentionRequest {
  int64_t batch = 1, hq = 1, hkv = 1, lq = 1, lk = 1;
  int64_t dk = 0, ds = 0, dv = 0;  // per-head key width, shared (split) key width, value width
  DType kv_dtype = DType::kF32;
  // score transform: s = softcap ? softcap * tanh(qk * scale / softcap) : qk * scale
  double scale = 1.0, softcap = 0.0;
  MaskKind mask = MaskKind::kNone;
  int64_t mask_batch = 1;
  bool live_len = false;  // key bound: the live length len[b] (else the capacity Lk)
  // >= 0: the mask is causal over these i32 query positions (plan::causal_positions): key t
  // is visible to query row i when t <= pos[i]; a kernel may read them instead of the mask.
  ir::ValueId causal_pos = -1;
  // Paged keys: K and V are pools of pool_rows rows [pool_rows, hkv, d], key t of row b read
  // at pool row read[b, t] (0 when the keys are dense [batch, hkv, lk, d]).
  int64_t pool_rows = 0;
  AttentionSchedule schedule = AttentionSchedule::kStreaming;
  int lanes = 1;          // streaming: lanes per task, the widest power of two <= 64 that fits
  int splits = 1;         // split-KV: key chunks per row
  int64_t chunk = 0;      // split-KV: keys per chunk (>= 128)
  int64_t scratch_floats = 0;  // split-KV partials, plan-local
  bool tensor_cores = false;   // GPU decode: on the tensor cores (16-bit products allowed)
};

struct KernelRequest {
  int eqn = -1;
  ir::OpKind op = ir::OpKind::kAdd;
  std::string kernel;  // "linear.q8_0", "attention.split_kv", "reshape.alias", ...
  AttentionRequest attention;  // op == kAttention only
  MoeRequest moe;              // op == kMoe only
};

std::string describe(const AttentionRequest& a);  // one line for --dump

}  // namespace kvf::plan
