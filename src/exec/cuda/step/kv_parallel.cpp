// Context-parallel attention on a group of GPU ranks (executor.h, create's kv_block): each
// attention reads the rank's share of the keys through a local map, its partial and softmax
// state are gathered over the group, and the merge gives every rank the one-device answer.
// A paged step's pools are shared out, so every attention of it splits; a dense cache is
// held whole by every rank, and only its one-row decodes split.
#include <algorithm>

#include "exec/cuda/step/executor.h"
#include "exec/cuda/step/pinned_memory.h"
#include "ir/printer.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;

namespace {

// The keys, lengths and mask an attention reads, and how its mask lies ([mask_batch,
// mask_rows, stride]): attentions over the same ones (every layer of a step) share one local
// map, made by the first of them.
struct KeysRead {
  const int32_t* map = nullptr;
  const int32_t* lens = nullptr;
  const float* mask = nullptr;
  int64_t batch = 0, stride = 0, mask_batch = 0, mask_rows = 1;
  bool operator==(const KeysRead&) const = default;
};

// Keys per row of the cache `a` reads: the read map's stride, or a contiguous cache's capacity.
int64_t key_stride(const DecodeAttentionArgs& a) { return a.read_map != nullptr ? a.map_stride : a.capacity; }

KeysRead keys_read(const DecodeAttentionArgs& a) {
  const int64_t mask_batch = a.mask == nullptr ? 0 : a.mask_stride == 0 ? 1 : a.batch;
  return {a.read_map, a.lens, a.mask, a.batch, key_stride(a), mask_batch, 1};
}

KeysRead keys_read(const AttentionArgs& a) {
  return {a.read, a.len, a.mask, a.batch, a.lk, a.mask == nullptr ? 0 : a.mask_batch, a.mask_heads * a.lq};
}

// Rank `rank`'s local map of the keys `k` names, its buffers in device memory that `owned` keeps.
Result<KvShardMap> allocate_shard_map(Device& device, std::vector<Buffer>& owned, const KeysRead& k, int64_t block,
                                      int rank, int ranks, bool pool) {
  KvShardMap m{.map = k.map, .lens = k.lens, .mask = k.mask, .batch = k.batch, .stride = k.stride, .block = block,
               .mask_batch = k.mask_batch, .mask_rows = k.mask_rows,
               .local_mask_batch = pool && k.mask_batch > 0 ? k.batch : k.mask_batch, .pool = pool, .rank = rank,
               .ranks = ranks};
  const int64_t mask_floats = m.local_mask_batch * m.mask_rows * m.stride;
  const int64_t tiles = pool ? m.batch * kv_shard_tiles(m.stride) : 0;
  const int64_t bytes = (m.batch * m.stride + m.batch + mask_floats + tiles) * 4;
  Result<void*> local = device.allocate_zeroed(bytes);
  if (!local) return local.take_error().context("a context-parallel rank's map of its keys");
  owned.emplace_back(&device, *local, bytes);
  m.local_map = static_cast<int32_t*>(*local);
  m.local_lens = m.local_map + m.batch * m.stride;
  m.local_mask = mask_floats > 0 ? reinterpret_cast<float*>(m.local_lens + m.batch) : nullptr;
  m.tile_counts = tiles > 0 ? m.local_lens + m.batch + mask_floats : nullptr;
  return m;
}

// `a` made the decode over the rank's keys alone, read through its local map. The launch in
// front may be the map's: with no keys named as written there, the decode waits for it
// before it reads anything.
void read_own_keys(DecodeAttentionArgs& a, const KvShardMap& m) {
  a.map_positions = a.read_map == nullptr;
  a.read_map = m.local_map;
  a.map_stride = static_cast<int>(m.stride);
  a.lens = m.local_lens;
  a.mask = m.local_mask;
  a.mask_stride = m.local_mask_batch > 1 ? static_cast<int>(m.stride) : 0;
  a.keys_written_from = nullptr;
  a.written_slots = nullptr;
  a.written_slot_count = 0;
}

AttentionArgs read_own_keys(AttentionArgs a, const KvShardMap& m) {
  a.read = m.local_map;
  a.len = m.local_lens;
  a.mask = m.local_mask;
  a.mask_batch = m.local_mask_batch;
  return a;
}

}  // namespace

// `op` over the rank's keys on whichever kernel the step chose: the decode kernel, else (a
// paged step's, whose pools the rank holds its share of) attention_rows.
Status CudaExecutor::bind_rank_attention(Op& op, KvParallelOp& kp) {
  if (op.decode_kernel) {
    read_own_keys(op.decode, kp.shard);
    Result<DecodePlan> plan = plan_decode_attention(op.decode);
    if (!plan) return plan.take_error().context("a context-parallel rank's decode");
    op.decode_plan = *plan;
    return {};
  }
  if (op.tiles) return internal_error("context parallel on the GPU: a paged step's attention on the dense tile kernel");
  kp.rows_kernel = true;
  kp.rows_args = read_own_keys(attention_args_of(op), kp.shard);
  kp.splits = plan_.requests[static_cast<size_t>(op.eqn)].attention.splits;
  return {};
}

Status CudaExecutor::bind_kv_parallel() {
  if (kv_block_ <= 0) return {};
  if (pool_split_) {
    Status s = plan::check_pool_readers(plan_.graph);
    if (!s) return s.take_error().context("context parallel on the GPU");
  }
  const int ranks = group_->size(), rank = group_->rank();
  std::vector<KeysRead> sources;
  std::vector<KvShardMap> maps;
  int64_t parts_floats = 0, workspace = 0;
  for (Op& op : body_) {
    if (plan_.graph.eqns[static_cast<size_t>(op.eqn)].op != OpKind::kAttention) continue;
    const AttentionArgs r = attention_args_of(op);
    if (!pool_split_ && r.lq != 1) continue;  // a dense cache's prefill or chunk runs whole on every rank
    if (!pool_split_ && !op.decode_kernel) {  // a dense cache's decode must split
      return unsupported("context parallel on the GPU: the decode attention ",
                         ir::value_ref(plan_.graph, plan_.graph.eqns[static_cast<size_t>(op.eqn)].out),
                         " does not run on the split-KV decode kernel (an f16 KV cache and one mask for every head)");
    }
    KvParallelOp kp{.rows = r.batch * r.hq * r.lq, .dv = r.dv, .out = r.out};
    const KeysRead keys = op.decode_kernel ? keys_read(op.decode) : keys_read(r);
    auto known = std::find(sources.begin(), sources.end(), keys);
    kp.make_map = known == sources.end();
    if (kp.make_map) {
      Result<KvShardMap> m = allocate_shard_map(device_, owned_, keys, kv_block_, rank, ranks, pool_split_.has_value());
      if (!m) return m.take_error();
      sources.push_back(keys);
      maps.push_back(*m);
      known = sources.end() - 1;
    }
    kp.shard = maps[static_cast<size_t>(known - sources.begin())];
    Status bound = bind_rank_attention(op, kp);
    if (!bound) return bound;
    if (op.decode_kernel) workspace = std::max<int64_t>(workspace, static_cast<int64_t>(op.decode_plan.workspace_bytes));
    parts_floats = std::max(parts_floats, ranks * kp.part_floats());
    op.kv_parallel = static_cast<int>(kv_parallel_.size());
    kv_parallel_.push_back(kp);
  }
  if (kv_parallel_.empty()) return {};
  Status s = bind_partials(parts_floats);
  if (s && workspace > decode_workspace_.bytes()) {  // a rank's plan may split its keys otherwise
    Result<void*> w = device_.allocate_zeroed(workspace);  // counters start at zero
    if (!w) return w.take_error().context("decode attention workspace");
    decode_workspace_ = Buffer(&device_, *w, workspace);
  }
  return s;
}

// One buffer of the ranks' partials for every attention of the step (they run in turn), and
// with host ranks its pinned staging: each attention writes its own place of the parts.
Status CudaExecutor::bind_partials(int64_t parts_floats) {
  const int ranks = group_->size(), rank = group_->rank();
  Result<void*> parts = device_.allocate_zeroed(parts_floats * 4);
  if (!parts) return parts.take_error().context("the context-parallel ranks' partials");
  owned_.emplace_back(&device_, *parts, parts_floats * 4);
  float* staged = nullptr;
  if (!group_->on_device()) {  // host ranks meet through pinned memory: the step runs eqn by eqn
    const int64_t staged_floats = parts_floats / ranks * (ranks + 1);  // mine, then everyone's
    Result<void*> host = pinned_memory().allocate_zeroed(staged_floats * 4);
    if (!host) return host.take_error().context("the context-parallel gathers' staging");
    staging_.emplace_back(&pinned_memory(), *host, staged_floats * 4);
    staged = static_cast<float*>(*host);
  }
  for (Op& op : body_) {
    if (op.kv_parallel < 0) continue;
    KvParallelOp& kp = kv_parallel_[static_cast<size_t>(op.kv_parallel)];
    kp.parts = static_cast<float*>(*parts);
    kp.staged = staged;
    float* mine = kp.parts + rank * kp.part_floats();
    if (kp.rows_kernel) {
      kp.rows_args.out = mine;
    } else {
      op.decode.out = mine;
      op.decode.ml = mine + kp.rows * kp.dv;
    }
  }
  return {};
}

Status CudaExecutor::kv_parallel_attention(const Op& op) {
  const KvParallelOp& kp = kv_parallel_[static_cast<size_t>(op.kv_parallel)];
  const Launch l{device_.stream(), device_.fault(), op.eqn, tc_};
  if (kp.make_map) kv_shard_map(kp.shard, l);
  Status s;
  if (kp.rows_kernel) {
    attention_rows(kp.rows_args, kp.splits, op.scratch, l, kp.rows_args.out + kp.rows * kp.dv);
  } else {
    s = decode_attention(op.decode, op.decode_plan, decode_workspace_.data(), device_.stream());
  }
  if (s) s = gather_partials(kp);
  if (!s) return s;
  return merge_attention_partials({.parts = group_->size(), .rows = static_cast<int>(kp.rows), .dv = static_cast<int>(kp.dv),
                                   .o = kp.parts, .ml = kp.parts + kp.rows * kp.dv, .out = kp.out, .out_ml = nullptr,
                                   .o_stride = kp.part_floats(), .ml_stride = kp.part_floats()},
                                  device_.stream());
}

// Every rank's partial rows and softmax state into every rank's parts, one block a rank: on
// the device by a group of GPUs (one all-gather a layer), else through pinned memory.
Status CudaExecutor::gather_partials(const KvParallelOp& kp) {
  const int ranks = group_->size(), rank = group_->rank();
  const int64_t n = kp.part_floats();
  if (group_->on_device()) return group_->all_gather_device(kp.parts, static_cast<size_t>(n), device_.stream());
  float* mine = kp.staged;
  float* all = kp.staged + n;
  Status s = device_.copy_to_host(mine, kp.parts + rank * n, n * 4);
  if (s) s = device_.synchronize("context-parallel gather");
  if (s) s = group_->all_gather(std::span<const float>(mine, static_cast<size_t>(n)),
                                std::span<float>(all, static_cast<size_t>(ranks * n)));
  if (s) s = device_.copy_to_device(kp.parts, all, ranks * n * 4);
  return s;
}

}  // namespace kvf::exec::cuda::step
