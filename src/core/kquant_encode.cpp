// Encoding q4_k and q6_k super-blocks: fit each sub-block, then code the fits as the
// format stores them (core/kquants.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kquants.h"

namespace kvf {
namespace {

int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi); }

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16_bits(v);
  std::memcpy(p, &h, 2);
}

float half_round(float v) { return f16_bits_to_f32(f32_to_f16_bits(v)); }

// w ≈ a·q − b with q in 0..qmax, a >= 0, b >= 0 over n values: start from the range, then
// alternate rounding q and the least-squares (a, b) for that q, keeping the best fit.
void fit_scale_min(const float* x, int n, int qmax, float& a_out, float& b_out) {
  const float lo = std::min(0.0f, *std::min_element(x, x + n)), hi = *std::max_element(x, x + n);
  float a = (hi - lo) / static_cast<float>(qmax), b = -lo;
  a_out = a, b_out = b;
  if (a <= 0.0f) {
    a_out = 0.0f;
    return;
  }
  double best = INFINITY;
  for (int iter = 0; iter < 6 && a > 0.0f; ++iter) {
    double sq = 0, sqq = 0, sqx = 0, sx = 0, err = 0;
    for (int i = 0; i < n; ++i) {
      const int q = round_clamp((x[i] + b) / a, 0, qmax);
      const double d = a * q - b - x[i];
      err += d * d;
      sq += q, sqq += static_cast<double>(q) * q, sqx += q * double{x[i]}, sx += x[i];
    }
    if (err < best) best = err, a_out = a, b_out = b;
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double na = (n * sqx - sq * sx) / det, nb = (na * sq - sx) / n;
    if (nb < 0) nb = 0, na = sqq > 0 ? sqx / sqq : 0;
    a = static_cast<float>(na), b = static_cast<float>(nb);
  }
}

// w ≈ s·q with q in -32..31 over n values: the extreme value mapped to -32 or to 31,
// whichever fits better, then one least-squares step.
float fit_scale_symmetric(const float* x, int n) {
  float ext = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(ext)) ext = x[i];
  }
  if (ext == 0.0f) return 0.0f;
  float best_s = 0.0f;
  double best = INFINITY;
  for (float s : {ext / -32.0f, ext / 31.0f}) {
    double sqx = 0, sqq = 0;
    for (int pass = 0; pass < 2; ++pass) {
      double err = 0;
      sqx = 0, sqq = 0;
      for (int i = 0; i < n; ++i) {
        const int q = round_clamp(x[i] / s, -32, 31);
        const double d = s * q - x[i];
        err += d * d, sqx += q * double{x[i]}, sqq += static_cast<double>(q) * q;
      }
      if (err < best) best = err, best_s = s;
      if (sqq <= 0) break;
      s = static_cast<float>(sqx / sqq);
    }
  }
  return best_s;
}

// The 12 scale bytes of q4_k/q5_k from eight 6-bit scales and mins (kquant_scale_min inverted).
void pack_scales_mins(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

}  // namespace

void quantize_q4_k(const float* x, uint8_t* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kKQuantElems, out += sizeof(BlockQ4_K)) {
    float a[8], mn[8];
    for (int j = 0; j < 8; ++j) fit_scale_min(x + 32 * j, 32, 15, a[j], mn[j]);
    const float amax = *std::max_element(a, a + 8), mmax = *std::max_element(mn, mn + 8);
    const float d = half_round(amax / 63.0f), dmin = half_round(mmax / 63.0f);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0.0f ? round_clamp(a[j] / d, 0, 63) : 0;
      m[j] = dmin > 0.0f ? round_clamp(mn[j] / dmin, 0, 63) : 0;
    }
    std::memset(out, 0, sizeof(BlockQ4_K));
    put_half(out, d);
    put_half(out + 2, dmin);
    pack_scales_mins(sc, m, out + 4);
    for (int j = 0; j < 8; ++j) {
      const float ds = d * static_cast<float>(sc[j]), dm = dmin * static_cast<float>(m[j]);
      uint8_t* qs = out + 16 + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        const int q = ds > 0.0f ? round_clamp((x[32 * j + l] + dm) / ds, 0, 15) : 0;
        qs[l] = static_cast<uint8_t>(qs[l] | (q << (4 * (j % 2))));
      }
    }
  }
}

void quantize_q6_k(const float* x, uint8_t* out, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b, x += kKQuantElems, out += sizeof(BlockQ6_K)) {
    float s[16];
    for (int j = 0; j < 16; ++j) s[j] = fit_scale_symmetric(x + 16 * j, 16);
    float smax = 0.0f;
    for (float v : s) smax = std::max(smax, std::fabs(v));
    const float d = half_round(smax / 127.0f);
    std::memset(out, 0, sizeof(BlockQ6_K));
    put_half(out + 208, d);
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? round_clamp(s[j] / d, -128, 127) : 0;
      out[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(sc));
      const float ds = d * static_cast<float>(sc);
      // Weight 16 j + l is weight 32 cc + l' of half h (kquant_chunk's layout).
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * j + l, h = e / 128, cc = (e % 128) / 32, li = e % 32;
        const int q = (ds != 0.0f ? round_clamp(x[e] / ds, -32, 31) : 0) + 32;
        uint8_t& low = out[64 * h + 32 * (cc % 2) + li];
        low = static_cast<uint8_t>(low | ((q & 15) << (4 * (cc / 2))));
        uint8_t& high = out[128 + 32 * h + li];
        high = static_cast<uint8_t>(high | ((q >> 4) << (2 * cc)));
      }
    }
  }
}

}  // namespace kvf
