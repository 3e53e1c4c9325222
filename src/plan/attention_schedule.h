// Picks the attention schedule for a device (seed 000: "The streaming schedule",
// "Split-KV decode") or refuses with a typed error naming what the device lacks.
#pragma once

#include "plan/device_caps.h"
#include "plan/request.h"

namespace kvf::plan {

// The CPU kernel cuts a row's keys into pieces at multiples of this many keys and folds the
// pieces' online softmaxes in key order (exec/cpu/attention.h): split-KV runs one task per
// piece, streaming runs them one after another, and both give the same bits.
inline constexpr int64_t kCpuAttentionPiece = 512;

// The pieces of `lk` keys: split-KV's task count per row.
inline constexpr int64_t cpu_attention_pieces(int64_t lk) { return (lk + kCpuAttentionPiece - 1) / kCpuAttentionPiece; }

// The fewest query rows for which a GPU runs a causal prefill on the tensor cores.
inline constexpr int64_t kGpuTileRows = 64;

// Fills schedule, lanes, splits, chunk and scratch_floats of `req`.
Status choose_attention_schedule(AttentionRequest& req, const DeviceCaps& caps);

}  // namespace kvf::plan
