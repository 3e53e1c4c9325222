// Tile arithmetic of the attention composites (flash_math.h). Keep it obvious: one loop nest
// per stage; the simulator's speed comes from per-tile events, not from clever loops here.
#include "exec/ahbm/flash_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvf::ahbm {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float round_mm(float x, DType t) { return t == DType::kF32 ? x : static_cast<float>(round_to_dtype(t, x)); }
}  // namespace

FlashState::FlashState(int64_t rows_, int64_t head_dim_)
    : rows(rows_), head_dim(head_dim_), m(static_cast<size_t>(rows_), kNegInf), l(static_cast<size_t>(rows_), 0.0f),
      o(static_cast<size_t>(rows_ * head_dim_), 0.0f) {}

std::vector<float> FlashState::pack() const {
  std::vector<float> p;
  p.reserve(m.size() + l.size() + o.size());
  p.insert(p.end(), m.begin(), m.end());
  p.insert(p.end(), l.begin(), l.end());
  p.insert(p.end(), o.begin(), o.end());
  return p;
}

void FlashState::unpack(const std::vector<float>& p) {
  const auto r = static_cast<std::ptrdiff_t>(rows);
  m.assign(p.begin(), p.begin() + r);
  l.assign(p.begin() + r, p.begin() + 2 * r);
  o.assign(p.begin() + 2 * r, p.end());
}

void TileBuffers::resize(int64_t tile, int64_t rows, int64_t head_dim) {
  k.resize(static_cast<size_t>(tile * head_dim));
  v.resize(static_cast<size_t>(tile * head_dim));
  s.resize(static_cast<size_t>(rows * tile));
  pv.resize(static_cast<size_t>(rows * head_dim));
  alpha.resize(static_cast<size_t>(rows));
}

void load_rows(const float* src, int64_t valid, int64_t tile, int64_t d, float* dst) {
  std::memcpy(dst, src, static_cast<size_t>(valid * d) * sizeof(float));
  std::fill(dst + valid * d, dst + tile * d, 0.0f);
}

// The dot product keeps kLanes partial sums (the compiler vectorizes them; one running sum
// would serialize on the add latency): prefill at 4k tokens is 17 G MACs per KV head.
void tile_scores(const float* q, int64_t rows, const float* k, int64_t tile, int64_t d, float scale, float* s) {
  constexpr int64_t kLanes = 8;
  for (int64_t r = 0; r < rows; ++r) {
    const float* qr = q + r * d;
    for (int64_t j = 0; j < tile; ++j) {
      const float* kr = k + j * d;
      float part[kLanes] = {};
      int64_t c = 0;
      for (; c + kLanes <= d; c += kLanes)
        for (int64_t u = 0; u < kLanes; ++u) part[u] += qr[c + u] * kr[c + u];
      float acc = 0;
      for (float p : part) acc += p;
      for (; c < d; ++c) acc += qr[c] * kr[c];
      s[r * tile + j] = acc * scale;
    }
  }
}

void tile_mask(float* s, int64_t rows, int64_t tile, const float* mask, int64_t mask_rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* m = mask + (r % mask_rows) * tile;
    for (int64_t j = 0; j < tile; ++j) s[r * tile + j] += m[j];
  }
}

void softmax_update(FlashState& st, int64_t row0, float* s, int64_t rows, int64_t tile, float* alpha, DType mm_input) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * tile;
    const size_t at = static_cast<size_t>(row0 + r);
    const float m_old = st.m[at];
    const float m_new = std::max(m_old, *std::max_element(row, row + tile));
    if (m_new == kNegInf) {  // nothing visible yet: keep the empty state
      alpha[r] = 1.0f;
      std::fill(row, row + tile, 0.0f);
      continue;
    }
    alpha[r] = std::exp(m_old - m_new);
    float sum = 0;
    for (int64_t j = 0; j < tile; ++j) sum += (row[j] = round_mm(std::exp(row[j] - m_new), mm_input));
    st.l[at] = st.l[at] * alpha[r] + sum;
    st.m[at] = m_new;
  }
}

void tile_pv(const float* p, int64_t rows, const float* v, int64_t tile, int64_t d, float* pv) {
  std::fill(pv, pv + rows * d, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* out = pv + r * d;
    for (int64_t j = 0; j < tile; ++j) {
      const float w = p[r * tile + j];
      if (w == 0.0f) continue;  // zero-filled rows past the valid length
      const float* vr = v + j * d;
      for (int64_t c = 0; c < d; ++c) out[c] += w * vr[c];
    }
  }
}

void update_output(FlashState& st, int64_t row0, int64_t rows, const float* alpha, const float* pv) {
  const int64_t d = st.head_dim;
  for (int64_t r = 0; r < rows; ++r) {
    float* o = st.o.data() + (row0 + r) * d;
    for (int64_t c = 0; c < d; ++c) o[c] = o[c] * alpha[r] + pv[r * d + c];
  }
}

void merge_into(FlashState& acc, const FlashState& b) {
  const int64_t d = acc.head_dim;
  for (int64_t r = 0; r < acc.rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (b.m[i] == kNegInf) continue;
    const float m = std::max(acc.m[i], b.m[i]);
    const float wa = acc.m[i] == kNegInf ? 0.0f : std::exp(acc.m[i] - m);
    const float wb = std::exp(b.m[i] - m);
    acc.l[i] = acc.l[i] * wa + b.l[i] * wb;
    float* ao = acc.o.data() + r * d;
    const float* bo = b.o.data() + r * d;
    for (int64_t c = 0; c < d; ++c) ao[c] = ao[c] * wa + bo[c] * wb;
    acc.m[i] = m;
  }
}

void normalize_row(const FlashState& st, int64_t row, float* out) {
  const int64_t d = st.head_dim;
  for (int64_t c = 0; c < d; ++c) out[c] = st.o[static_cast<size_t>(row * d + c)] / st.l[static_cast<size_t>(row)];
}

void normalize(const FlashState& st, float* out) {
  for (int64_t r = 0; r < st.rows; ++r) normalize_row(st, r, out + r * st.head_dim);
}

void copy_rows(const FlashState& src, FlashState& dst, int64_t row0, int64_t rows) {
  const auto r0 = static_cast<std::ptrdiff_t>(row0), n = static_cast<std::ptrdiff_t>(rows);
  const auto d = static_cast<std::ptrdiff_t>(src.head_dim);
  std::copy(src.m.begin() + r0, src.m.begin() + r0 + n, dst.m.begin() + r0);
  std::copy(src.l.begin() + r0, src.l.begin() + r0 + n, dst.l.begin() + r0);
  std::copy(src.o.begin() + r0 * d, src.o.begin() + (r0 + n) * d, dst.o.begin() + r0 * d);
}

}  // namespace kvf::ahbm
