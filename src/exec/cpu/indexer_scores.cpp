// The lightning indexer's scores on the CPU (indexer_scores.h): the portable body, the
// dispatch, and the rows' transposed queries.
#include "exec/cpu/indexer_scores.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "exec/cpu/linear.h"

namespace kvf::exec::cpu {

namespace detail {

void indexer_keys_portable(const IndexerRow& r, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    float sum = 0;
    for (int64_t h = 0; h < r.hp; ++h) {
      float dot = 0;
      for (int64_t d = 0; d < r.dim; ++d) {
        const float kv = r.k_type == DType::kF16 ? f16_bits_to_f32(static_cast<const uint16_t*>(r.k)[t * r.dim + d])
                                                 : static_cast<const float*>(r.k)[t * r.dim + d];
        dot += r.qt[d * r.hp + h] * kv;
      }
      sum += r.wp[h] * std::max(dot * r.scale, 0.0f);
    }
    r.out[t] = sum;
  }
}

}  // namespace detail

namespace {

// Keys a task scores: enough work to be worth a wake-up, few enough to share out a decode.
constexpr int64_t kKeysPerTask = 512;

using KeysFn = void (*)(const detail::IndexerRow&, int64_t, int64_t);

std::pair<KeysFn, int64_t> body() {  // the body and its vector width in floats
  static const std::string_view isa = linear_isa();
  if (isa == "avx512") return {detail::indexer_keys_avx512, 16};
  if (isa == "avx2") return {detail::indexer_keys_avx2, 8};
  return {detail::indexer_keys_portable, 1};
}

}  // namespace

void indexer_scores(ThreadPool& pool, const IndexerScoresArgs& a) {
  const auto [keys_fn, lanes] = body();
  const int64_t hp = (a.heads + lanes - 1) / lanes * lanes;
  std::vector<float> qt(static_cast<size_t>(a.dim * hp)), wp(static_cast<size_t>(hp));
  const size_t key_bytes = a.k_type == DType::kF16 ? 2 : 4;
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int64_t i = 0; i < a.n; ++i) {
      std::fill(qt.begin(), qt.end(), 0.0f);
      std::fill(wp.begin(), wp.end(), 0.0f);  // padded heads weigh 0
      for (int64_t h = 0; h < a.heads; ++h) {
        const float* q = a.q + ((r * a.heads + h) * a.n + i) * a.dim;
        for (int64_t d = 0; d < a.dim; ++d) qt[static_cast<size_t>(d * hp + h)] = q[d];
        wp[static_cast<size_t>(h)] = a.w[(r * a.heads + h) * a.n + i];
      }
      const detail::IndexerRow row{qt.data(), wp.data(), hp, a.dim,
                                   static_cast<const char*>(a.k) + static_cast<size_t>(r * a.keys * a.dim) * key_bytes,
                                   a.k_type, a.scale, a.out + (r * a.n + i) * a.keys};
      const int64_t tasks = (a.keys + kKeysPerTask - 1) / kKeysPerTask;
      pool.parallel_for(tasks, [&](int64_t lo, int64_t hi) {
        keys_fn(row, lo * kKeysPerTask, std::min(a.keys, hi * kKeysPerTask));
      });
    }
  }
}

}  // namespace kvf::exec::cpu
