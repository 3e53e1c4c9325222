// KV placement arithmetic of ADR §2: a request's KV token i lives on group PE
// (start_pe + i) mod N, start_pe = request_id mod N, densely in slot i / N. The kernel derives
// everything from (global_token_counter, start_pe, pe_id, N); the driver passes only those.
#pragma once

#include <cstdint>

namespace kvf::ahbm {

struct KvGeometry {
  int64_t counter = 0;  // global_token_counter: tokens already in the cache
  int start_pe = 0;     // request_id mod n
  int n = 1;            // PEs in the reduction group
};

inline int64_t floor_mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// ((pe_id - start_pe) mod N): the pe's position in the request's round-robin order.
inline int rotation(const KvGeometry& g, int pe_id) { return static_cast<int>(floor_mod(pe_id - g.start_pe, g.n)); }
// The group PE that holds global token `token`.
inline int owner_pe(const KvGeometry& g, int64_t token) { return static_cast<int>(floor_mod(g.start_pe + token, g.n)); }
// Its dense slot on that PE.
inline int64_t slot_of(const KvGeometry& g, int64_t token) { return token / g.n; }
// slot -> global index: local_slot * N + ((pe_id - start_pe) mod N) (ADR §2.1; the RoPE position).
inline int64_t global_of(const KvGeometry& g, int pe_id, int64_t slot) { return slot * g.n + rotation(g, pe_id); }
// Tokens held by pe_id: counter / N, plus one for the first counter % N PEs of the rotation.
inline int64_t valid_len(const KvGeometry& g, int pe_id) {
  return g.counter / g.n + (rotation(g, pe_id) < g.counter % g.n ? 1 : 0);
}
// Whether pe_id writes the next token (the upstream qkv_rope kernel's turn test).
inline bool my_turn_to_write(const KvGeometry& g, int pe_id) { return owner_pe(g, g.counter) == pe_id; }
// Per-PE buffer rows for a context of max_context tokens: ceil(max_context / N).
inline int64_t capacity_per_pe(int64_t max_context, int n) { return (max_context + n - 1) / n; }

// Prefill with SP (ADR §5.5): the prompt's len tokens cut into one shard per ring rank; a PE
// holds the queries and the K/V of its shard. kContiguous: rank p holds a run of
// consecutive tokens (lengths within one, the longer runs first), so a KV block is either
// wholly before, wholly after or on the diagonal of a query block and the ring can skip
// the steps after it. kStrided: the decode round-robin above, (start_pe + i) mod N; every
// shard then reaches to the end of the prompt and no ring step is ever all-future.
enum class ShardLayout { kContiguous, kStrided };

struct ShardGeometry {
  int64_t len = 0;  // prompt tokens
  int n = 1;        // ring ranks
  int start_pe = 0;  // kStrided only: request_id mod n
  ShardLayout layout = ShardLayout::kContiguous;
  KvGeometry strided() const { return KvGeometry{len, start_pe, n}; }
};

inline int64_t shard_len(const ShardGeometry& g, int rank) {
  if (g.layout == ShardLayout::kStrided) return valid_len(g.strided(), rank);
  return g.len / g.n + (rank < g.len % g.n ? 1 : 0);
}
// The global index (the RoPE position, ADR P5) of the shard's slot-th token.
inline int64_t shard_global(const ShardGeometry& g, int rank, int64_t slot) {
  if (g.layout == ShardLayout::kStrided) return global_of(g.strided(), rank, slot);
  const int64_t base = g.len / g.n, extra = g.len % g.n;
  return rank * base + (rank < extra ? rank : extra) + slot;
}

}  // namespace kvf::ahbm
