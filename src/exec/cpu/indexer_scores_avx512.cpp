// The lightning indexer's AVX-512 body (indexer_scores_body.h, 16 heads a vector). Built with
// AVX-512 flags only; indexer_scores.cpp calls it when the CPU has them.
// GCC 12's _mm512_cvtph_ps trips -W(maybe-)uninitialized on the header's own placeholder once
// inlined (GCC PR 105593); nothing here is read uninitialized.
#if defined(__GNUC__) && !defined(__clang__)  // clang has neither warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "exec/cpu/indexer_scores_body.h"
#include "exec/cpu/isa_avx512.h"

namespace kvf::exec::cpu::detail {

void indexer_keys_avx512(const IndexerRow& r, int64_t t0, int64_t t1) { indexer_keys_with<Avx512>(r, t0, t1); }

}  // namespace kvf::exec::cpu::detail
