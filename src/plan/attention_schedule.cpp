#include "plan/attention_schedule.h"

#include <algorithm>

namespace kvf::plan {
namespace {

constexpr int kMaxLanes = 64;

int64_t lane_state_bytes(const AttentionRequest& r) { return (r.dv + 2) * 4; }

// Decode whose key-head rows leave cores idle gets one task per key piece instead of one per
// row, when the keys span two pieces or more.
int split_count(const AttentionRequest& r, const DeviceCaps& caps) {
  if (r.lq != 1) return 1;
  const int64_t rows = r.batch * r.hkv;  // one pass per key head serves its n_rep query heads
  if (rows >= 2 * caps.cores) return 1;
  return static_cast<int>(cpu_attention_pieces(r.lk));
}

// A causal prefill of one sequence (the mask's positions are its rows') over a dense f16
// cache of a head dim the tile kernel has, with enough query rows to fill its 64-row tiles,
// where 16-bit products are allowed: the tensor cores (q and the probabilities rounded to
// f16, as the cache already is; f32 accumulation).
bool gpu_tiles(const AttentionRequest& r, const DeviceCaps& caps) {
  const bool width = r.dk == r.dv && (r.dk == 64 || r.dk == 128 || r.dk == 256);
  return caps.half_compute && r.causal_pos >= 0 && r.live_len && r.batch == 1 && r.kv_dtype == DType::kF16 && r.pool_rows == 0 &&
         r.ds == 0 && width && r.lq >= kGpuTileRows;
}

// A one-query decode over an f16 cache, of a head width the tensor-core decode kernel has,
// where 16-bit products are allowed: mma.sync over the key head's query rows, q and the
// probabilities each split into a 16-bit high and low part (f32 sums). It reads the bytes
// the SIMT kernel reads with far fewer instructions, where short rows leave the SIMT kernel
// bound by its issue rate (docs/cuda.md).
bool gpu_decode_tensor_cores(const AttentionRequest& r, const DeviceCaps& caps) {
  return caps.half_compute && r.lq == 1 && r.kv_dtype == DType::kF16 && r.ds == 0 && r.dk == r.dv &&
         (r.dk == 64 || r.dk == 128) && r.mask != MaskKind::kPerHead;
}

// On a GPU: one block per (row, key head, query row) cell and key split (exec/cuda/step);
// the keys are split when the cells alone do not fill the multiprocessors twice, never into
// splits of fewer than 32 keys at full capacity. Each split takes an equal share of a row's
// live keys, so `chunk` stays 0.
Status choose_gpu_schedule(AttentionRequest& req, const DeviceCaps& caps) {
  req.lanes = 32;
  req.schedule = AttentionSchedule::kStreaming;
  req.splits = 1;
  req.chunk = 0;
  req.scratch_floats = 0;
  req.tensor_cores = gpu_decode_tensor_cores(req, caps);
  if (gpu_tiles(req, caps)) {
    req.schedule = AttentionSchedule::kTiles;
    return {};
  }
  const int64_t cells = req.batch * req.hkv * req.lq, target = 2 * static_cast<int64_t>(caps.cores);
  if (cells >= target || req.lk <= 32) return {};
  const int64_t splits = std::min((req.lk + 31) / 32, (target + cells - 1) / cells);
  if (splits < 2) return {};
  req.schedule = AttentionSchedule::kSplitKV;
  req.splits = static_cast<int>(splits);
  req.scratch_floats = req.batch * req.hq * req.lq * splits * (req.dv + 2);
  return {};
}

}  // namespace

Status choose_attention_schedule(AttentionRequest& req, const DeviceCaps& caps) {
  if (req.kv_dtype == DType::kF16 && !caps.has_f16_kv) {
    return unsupported("attention: ", caps.name, " cannot read f16 K/V (KvDtype)");
  }
  const int64_t one = lane_state_bytes(req);
  if (one > caps.lane_state_bytes) {
    return unsupported("attention: the running state of one lane (dv ", req.dv, " + 2 floats = ", one,
                       " bytes) exceeds the device's ", caps.lane_state_bytes, " bytes (AttentionLds)");
  }
  if (caps.target == Target::kCuda) return choose_gpu_schedule(req, caps);
  req.lanes = 1;
  while (req.lanes * 2 <= kMaxLanes && req.lanes * 2 * one <= caps.lane_state_bytes) req.lanes *= 2;
  req.schedule = AttentionSchedule::kStreaming;
  req.splits = 1;
  req.chunk = 0;
  req.scratch_floats = 0;
  const int splits = split_count(req, caps);
  if (splits < 2) return {};
  const int64_t scratch = req.batch * req.hq * splits * (req.dv + 2);
  if (scratch * 4 > caps.max_scratch_bytes) return {};  // keep streaming: the partials would not fit
  req.schedule = AttentionSchedule::kSplitKV;
  req.splits = splits;
  req.chunk = kCpuAttentionPiece;
  req.scratch_floats = scratch;
  return {};
}

std::string describe(const AttentionRequest& a) {
  std::string s = str_cat("attention B", a.batch, " Hq", a.hq, "/Hkv", a.hkv, " Lq", a.lq, " Lk", a.lk, " dk", a.dk);
  if (a.ds) s += str_cat("+", a.ds, "shared");
  s += str_cat(" dv", a.dv, " kv ", dtype_name(a.kv_dtype), " scale ", a.scale);
  if (a.softcap > 0) s += str_cat(" softcap ", a.softcap);
  s += a.mask == MaskKind::kNone ? " no-mask" : a.mask == MaskKind::kShared ? " mask" : " mask/head";
  s += a.live_len ? " keys<len" : " keys<Lk";
  if (a.causal_pos >= 0) s += " causal";
  if (a.pool_rows > 0) s += str_cat(" paged pool=", a.pool_rows);
  if (a.tensor_cores) s += " tensor-cores";
  if (a.schedule == AttentionSchedule::kStreaming) return s + str_cat(" streaming lanes=", a.lanes);
  if (a.schedule == AttentionSchedule::kTiles) return s + " tiles";
  return s + str_cat(" split-kv splits=", a.splits, " chunk=", a.chunk, " scratch=", a.scratch_floats * 4, "B");
}

}  // namespace kvf::plan
