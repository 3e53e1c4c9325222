// The step executor's attention bindings: what each attention eqn's kernel reads (its rows'
// arguments), which decodes the split-KV decode kernel takes (and which of their keys it may
// load before its wait), and which prefills go on tiles. Launching them is executor.cpp's.
#include "exec/cuda/step/executor.h"

#include "exec/attention_operands.h"
#include "ir/printer.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;

AttentionArgs CudaExecutor::attention_args_of(const Op& op) const {
  const size_t eqn = static_cast<size_t>(op.eqn);
  return attention_operands(plan_.graph.eqns[eqn].params.attn, plan_.requests[eqn].attention, op.in, op.out.data);
}

// A decode over a dense or paged f16 cache with a live length: the split-KV decode kernel
// runs it, planned once for the capacity and chunked by each row's length at run time, so
// one captured graph serves every length. A mask shared by the heads (a paged step's causal
// or windowed mask over its key positions) is added to the scores there; a contiguous
// decode has none (the compiler drops the causal mask its length implies). Anything else
// (a mask per head, f32 K/V, several query rows, a split key, a head width the kernel
// lacks) stays on attention_rows.
bool CudaExecutor::decode_args(const Op& op, DecodeAttentionArgs& a) const {
  const ir::AttnParams& p = plan_.graph.eqns[static_cast<size_t>(op.eqn)].params.attn;
  const AttentionArgs r = attention_args_of(op);
  if (!p.has_len || p.has_shared || r.lq != 1 || r.kv_dtype != DType::kF16 || (p.has_mask && r.mask_heads != 1)) return false;
  if (r.lk > INT32_MAX || r.batch > INT32_MAX || r.hq > INT32_MAX) return false;
  a.kv_type = KvType::kF16;
  a.batch = static_cast<int>(r.batch);
  a.q_heads = static_cast<int>(r.hq);
  a.kv_heads = static_cast<int>(r.hkv);
  a.lq = 1;
  a.dk = static_cast<int>(r.dk);
  a.dv = static_cast<int>(r.dv);
  a.q = r.q;
  a.k = r.k;
  a.v = r.v;
  a.read_map = r.read;
  a.capacity = r.read == nullptr ? static_cast<int>(r.lk) : 0;
  a.map_stride = r.read == nullptr ? 0 : static_cast<int>(r.lk);
  a.lens = r.len;
  a.max_len = static_cast<int>(r.lk);
  a.chunks_from_lens = true;
  // The plan's kernel: the tensor cores where 16-bit products are allowed, else the SIMT
  // kernel's f32 products over the widened f16 rows, as the CPU computes them (the tensor
  // cores' 16-bit split of q and P left a synthetic gpt2 step 1.06e-4 from the CPU's
  // logits, over the f32 bound of 1e-4).
  a.kernel = plan_.requests[static_cast<size_t>(op.eqn)].attention.tensor_cores ? DecodeKernel::kTensorCores
                                                                                 : DecodeKernel::kSimt;
  a.programmatic = true;
  a.scale = r.scale;
  a.softcap = r.softcap;
  a.mask = p.has_mask ? r.mask : nullptr;
  a.mask_stride = r.mask_batch == 1 ? 0 : static_cast<int>(r.lk);
  a.out = r.out;
  return true;
}

// Where the launch in front of a decode is a step's ropes and cache writes (a pack, or the
// QKV group whose epilogue runs them), it writes q and the newest keys and values, and it
// waited for every launch before it (those kernels let the next launch only after their
// wait): the decode may load the other keys before it waits. Tells it which keys those
// writes reach (a dense cache's rows from one start on, or a pool's slots), unless the
// launch might write anything else the decode reads.
void CudaExecutor::tell_written_keys(const Op& front, DecodeAttentionArgs& a) {
  if (a.window != 0 || a.lq != 1) return;
  const bool pool = a.read_map != nullptr;
  const Pack& pack = front.grouped > 0 ? front.group.then : front.pack;
  const int32_t* start = nullptr;  // dense: the cache writes' start row
  const int32_t* slots = nullptr;  // pool: the rows written
  int64_t n_slots = 0;
  for (int i = 0; i < pack.tasks; ++i) {
    const PackTask& t = pack.task[i];
    const bool rows = t.kind == PackKind::kSlice || t.kind == PackKind::kRopeIntoSlice;
    const bool scatter = t.kind == PackKind::kScatter || t.kind == PackKind::kRopeIntoScatter;
    const void* out = rows ? t.slice.out : scatter ? t.scatter.out : t.rope.out;
    if (out == a.lens || out == a.mask || out == a.read_map) return;
    if (out != a.k && out != a.v) continue;  // q, or what the decode does not read
    const int64_t d = out == a.k ? a.dk : a.dv;
    if (pool) {
      const ScatterTask& w = t.scatter;
      if (!scatter || w.row != int64_t{a.kv_heads} * d || (slots != nullptr && (w.idx != slots || w.m != n_slots))) return;
      slots = w.idx;
      n_slots = w.m;
    } else {
      const SliceTask& w = t.slice;
      if (!rows || w.outer != int64_t{a.batch} * a.kv_heads || w.extent != a.capacity || w.inner != d) return;
      if (start != nullptr && w.start != start) return;
      start = w.start;
    }
  }
  if (pool) {  // more rows than the decode checks: it waits first (decode_attention)
    a.written_slots = slots;
    a.written_slot_count = static_cast<int>(std::min<int64_t>(n_slots, INT32_MAX));
  } else {
    a.keys_written_from = start;
  }
}

Status CudaExecutor::bind_decode_attention() {
  size_t bytes = 0, counters = 0;
  for (size_t i = 0; i < body_.size(); ++i) {
    Op& op = body_[i];
    if (plan_.graph.eqns[static_cast<size_t>(op.eqn)].op != OpKind::kAttention) continue;
    DecodeAttentionArgs a;
    if (!decode_args(op, a)) continue;
    if (i > 0) tell_written_keys(body_[i - 1], a);
    Result<DecodePlan> plan = plan_decode_attention(a);
    if (!plan) continue;  // a shape the kernel refuses: attention_rows runs it
    op.decode_kernel = true;
    op.decode = a;
    op.decode_plan = *plan;
    bytes = std::max(bytes, plan->workspace_bytes);
    counters = std::max(counters, plan->counter_bytes);
  }
  if (bytes == 0) return {};
  Result<void*> p = device_.allocate_zeroed(static_cast<int64_t>(bytes));  // counters start at zero
  if (!p) return p.take_error().context("decode attention workspace");
  decode_workspace_ = Buffer(&device_, *p, static_cast<int64_t>(bytes));
  return {};
}

// The attention the plan puts on tiles (a causal prefill over a dense f16 cache): the mask's
// positions are read in place of the mask.
Status CudaExecutor::bind_tile_attention() {
  for (Op& op : body_) {
    const plan::AttentionRequest& r = plan_.requests[static_cast<size_t>(op.eqn)].attention;
    if (plan_.graph.eqns[static_cast<size_t>(op.eqn)].op != OpKind::kAttention) continue;
    if (r.schedule != plan::AttentionSchedule::kTiles) continue;
    const AttentionArgs rows = attention_args_of(op);
    StepPrefillArgs& a = op.tile_args;
    a.kv_type = KvType::kF16;
    a.batch = static_cast<int>(r.batch);
    a.q_heads = static_cast<int>(r.hq);
    a.kv_heads = static_cast<int>(r.hkv);
    a.head_dim = static_cast<int>(r.dk);
    a.lq = static_cast<int>(r.lq);
    a.cap = static_cast<int>(r.lk);
    a.q = rows.q;
    a.k = rows.k;
    a.v = rows.v;
    a.out = rows.out;
    a.lens = rows.len;
    a.pos = static_cast<const int32_t*>(refs_[static_cast<size_t>(r.causal_pos)].data);
    a.scale = rows.scale;
    a.softcap = rows.softcap;
    Status s = check_step_prefill_attention(a);
    if (!s) return s.take_error().context("exec/cuda: ", ir::value_ref(plan_.graph, plan_.graph.eqns[static_cast<size_t>(op.eqn)].out));
    op.tiles = true;
  }
  return {};
}

}  // namespace kvf::exec::cuda::step
