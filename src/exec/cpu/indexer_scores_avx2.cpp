// The lightning indexer's AVX2 body (indexer_scores_body.h, 8 heads a vector). Built with
// AVX2 flags only; indexer_scores.cpp calls it when the CPU has them.
#include "exec/cpu/indexer_scores_body.h"
#include "exec/cpu/isa_avx2.h"

namespace kvf::exec::cpu::detail {

void indexer_keys_avx2(const IndexerRow& r, int64_t t0, int64_t t1) { indexer_keys_with<Avx2>(r, t0, t1); }

}  // namespace kvf::exec::cpu::detail
