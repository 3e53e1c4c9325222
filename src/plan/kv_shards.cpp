// Round-robin position sharding, a paged pool shared out by blocks, and the ring prefill schedule (kv_shards.h).
#include "plan/kv_shards.h"

#include "ir/printer.h"

namespace kvf::plan {

Result<KvShards> KvShards::create(int ranks, int64_t block_tokens) {
  if (ranks < 1) return invalid_input("context parallel: ", ranks, " ranks, expected at least 1");
  if (block_tokens < 1) return invalid_input("context parallel: blocks of ", block_tokens, " tokens, expected at least 1");
  return KvShards{ranks, block_tokens};
}

int64_t KvShards::count(int rank, int64_t n) const {
  const int64_t full = n / block_tokens, tail = n % block_tokens;
  const int64_t full_here = full / ranks + (rank < full % ranks ? 1 : 0);
  const bool tail_here = tail > 0 && owner(full * block_tokens) == rank;
  return full_here * block_tokens + (tail_here ? tail : 0);
}

std::vector<int64_t> KvShards::positions(int rank, int64_t n) const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count(rank, n)));
  for (int64_t start = rank * block_tokens; start < n; start += ranks * block_tokens) {
    for (int64_t p = start; p < start + block_tokens && p < n; ++p) out.push_back(p);
  }
  return out;
}

std::vector<int64_t> KvShards::blocks_of(int rank, int64_t n_blocks) const {
  std::vector<int64_t> out;
  for (int64_t k = rank; k < n_blocks; k += ranks) out.push_back(k);
  return out;
}

std::vector<int64_t> PoolShards::columns(int rank, const int32_t* row, int64_t len) const {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < len; ++j) {
    if (owner(row[j]) == rank) out.push_back(j);
  }
  return out;
}

Status check_pool_readers(const ir::Graph& g) {
  const ir::ValueId read = g.find_slot(ir::Slot::kSlotMap), write = g.find_slot(ir::Slot::kWriteMap);
  if (read < 0) return {};
  const int64_t slots = g.value(read).slot_bound;
  std::vector<bool> pooled(g.values.size(), false);
  for (size_t i = 0; i < g.values.size(); ++i) pooled[i] = is_pool(g.values[i], slots);
  for (const ir::Eqn& e : g.eqns) {
    const bool written = e.op == ir::OpKind::kScatterUpdate && e.in.size() == 3 && e.in[1] == write;
    for (size_t k = 0; k < e.in.size(); ++k) {
      const ir::ValueId v = e.in[k];
      const bool refused = (v == write && !written) ||
                           (pooled[static_cast<size_t>(v)] && e.op != ir::OpKind::kAttention && !(written && k == 0));
      if (refused) {
        return unsupported("a pool shared out over ranks: ", ir::value_ref(g, e.out), " (", ir::op_name(e.op), ") reads ",
                           v == write ? "the write map" : str_cat("the pool ", ir::value_ref(g, v)),
                           ", which is neither an attention nor a write through the write map");
      }
    }
    if (written && pooled[static_cast<size_t>(e.in[0])]) pooled[static_cast<size_t>(e.out)] = true;
  }
  return {};
}

int ring_source(const KvShards& shards, int rank, int step) {
  return ((rank - step) % shards.ranks + shards.ranks) % shards.ranks;
}

std::vector<BlockPair> ring_pairs(const KvShards& shards, int64_t n, int rank, int step) {
  const int64_t n_blocks = shards.blocks(n);
  const std::vector<int64_t> keys = shards.blocks_of(ring_source(shards, rank, step), n_blocks);
  std::vector<BlockPair> out;
  for (int64_t q : shards.blocks_of(rank, n_blocks)) {
    for (int64_t k : keys) {
      if (k > q) break;  // keys ascend: the rest are in the query block's future
      out.push_back({q, k});
    }
  }
  return out;
}

}  // namespace kvf::plan
