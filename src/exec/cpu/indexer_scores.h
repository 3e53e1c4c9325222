// A lightning indexer's scores on the CPU (ops::indexer_scores): for each query row i of
// batch row r and each key t,
//   out[r, i, t] = Σ_h w[r, h, i] · relu(scale · q[r, h, i] · k[r, t])
// Every head's dot with a key is summed in registers and folded into the key's score there;
// nothing per head is written out. The vector bodies hold a row's queries transposed, [D][H]
// with the heads padded to whole vectors (weight 0), and run four keys against up to four
// vectors of heads at once; each key's sum is the same in every schedule.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace kvf::exec::cpu {

struct IndexerScoresArgs {
  const float* q = nullptr;   // [R, H, n, D]
  const void* k = nullptr;    // [R, L, D] in k_type (f32 or f16)
  DType k_type = DType::kF32;
  const float* w = nullptr;   // [R, H, n]
  int64_t rows = 1, heads = 1, n = 1, dim = 1, keys = 0;
  float scale = 1.0f;
  float* out = nullptr;       // [R, n, L]
};
void indexer_scores(ThreadPool& pool, const IndexerScoresArgs& a);

// The bodies; indexer_scores() runs the best the CPU has (linear_isa()).
namespace detail {
// One query row over keys [t0, t1): its queries transposed qt [D][hp] and weights wp [hp]
// (hp: the heads padded to the body's vector), out the row's scores.
struct IndexerRow {
  const float* qt;
  const float* wp;
  int64_t hp, dim;
  const void* k;  // the row's keys [L, D]
  DType k_type;
  float scale;
  float* out;
};
void indexer_keys_portable(const IndexerRow& r, int64_t t0, int64_t t1);
void indexer_keys_avx2(const IndexerRow& r, int64_t t0, int64_t t1);
void indexer_keys_avx512(const IndexerRow& r, int64_t t0, int64_t t1);
}  // namespace detail

}  // namespace kvf::exec::cpu
