// The values the attention composites compute, tile by tile, in plain loops: scores,
// mask, the online-softmax update, P·V, the running-output update and the log-sum-exp
// merge (FlashAttention / FlashDecoding). fp32 accumulators; MM inputs rounded to the
// storage type as a bf16 MAC array would see them. The reference is eval/ (reference.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace kvf::ahbm {

// Running state of `rows` query rows: m, l [rows], O [rows, head_dim], unnormalized.
struct FlashState {
  FlashState() = default;
  FlashState(int64_t rows, int64_t head_dim);
  int64_t rows = 0, head_dim = 0;
  std::vector<float> m, l, o;

  // m, l, O packed as one IPCQ payload, and back.
  std::vector<float> pack() const;
  void unpack(const std::vector<float>& payload);
  int64_t payload_bytes() const { return (2 * rows + rows * head_dim) * 4; }
};

// One composite's SRAM working set.
struct TileBuffers {
  std::vector<float> k, v;    // [tile, head_dim]; rows past `valid` are zero
  std::vector<float> s;       // [rows, tile]: scores, then probabilities
  std::vector<float> pv;      // [rows, head_dim]
  std::vector<float> alpha;   // [rows]: exp(m_old - m_new)
  std::vector<float> mask;    // [mask_rows, tile] additive, or empty for the null mask
  int64_t valid = 0;
  void resize(int64_t tile, int64_t rows, int64_t head_dim);  // all but the mask, which the kernel builds
};

// dst [tile, d] <- the first `valid` rows of src, zero-filling the rest (the DMA's fill).
void load_rows(const float* src, int64_t valid, int64_t tile, int64_t d, float* dst);
// s [rows, tile] = scale * q [rows, d] · k [tile, d]ᵀ
void tile_scores(const float* q, int64_t rows, const float* k, int64_t tile, int64_t d, float scale, float* s);
// s [rows, tile] += mask [mask_rows, tile]: row r takes mask row r % mask_rows (decode: one
// row for every query; prefill: one row per query token, shared by the G heads of the block).
void tile_mask(float* s, int64_t rows, int64_t tile, const float* mask, int64_t mask_rows);
// Online softmax: m, l of st and alpha from the scores; s becomes P rounded to mm_input.
void softmax_update(FlashState& st, int64_t row0, float* s, int64_t rows, int64_t tile, float* alpha, DType mm_input);
// pv [rows, d] = p [rows, tile] · v [tile, d]
void tile_pv(const float* p, int64_t rows, const float* v, int64_t tile, int64_t d, float* pv);
// O = O * alpha + pv for rows row0.. of st.
void update_output(FlashState& st, int64_t row0, int64_t rows, const float* alpha, const float* pv);
// acc = merge(acc, other) (ADR §4); an empty side (m = -inf) contributes nothing.
void merge_into(FlashState& acc, const FlashState& other);
// out [rows, d] = O / l
void normalize(const FlashState& st, float* out);
// out [d] = O [row] / l [row]
void normalize_row(const FlashState& st, int64_t row, float* out);
// dst's rows row0 .. row0 + rows = src's (m, l and O): a state spill or reload.
void copy_rows(const FlashState& src, FlashState& dst, int64_t row0, int64_t rows);

}  // namespace kvf::ahbm
