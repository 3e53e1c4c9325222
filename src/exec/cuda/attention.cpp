// The decode host API: argument checks, the split schedule, and the launch; the merge of
// partial attentions over disjoint keys.
#include "exec/cuda/attention.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "exec/cuda/decode_launch.h"
#include "exec/cuda/device_props.h"
#include "plan/decode_splits.h"

namespace kvf::exec::cuda {
namespace {

int round_up(int x, int m) { return (x + m - 1) / m * m; }

int blocks_per_sm(int dk, int rows, bool paged, bool tc) {
  switch (dk) {
    case 64: return detail::blocks_per_sm_d64(rows, paged, tc);
    case 128: return detail::blocks_per_sm_d128(rows, paged, tc);
    case 256: return detail::blocks_per_sm_d256(rows, paged, tc);
    case 192: return detail::blocks_per_sm_d192_128(rows, paged, tc);
    default: return 0;
  }
}

}  // namespace

Result<DecodePlan> plan_decode_attention(const DecodeAttentionArgs& a) {
  if (detail::decode_traits(a.dk, a.dv, false).keys_per_iter == 0)
    return unsupported("cuda decode_attention: head dims (dk ", a.dk, ", dv ", a.dv,
                       "); supported: (64,64) (128,128) (256,256) (192,128)");
  const bool has_tc = detail::decode_traits(a.dk, a.dv, true).keys_per_iter > 0;
  if (a.kernel == DecodeKernel::kTensorCores && !has_tc)
    return unsupported("cuda decode_attention: the tensor-core kernel takes head dims (64,64) and (128,128), not (",
                       a.dk, ",", a.dv, ")");
  if (a.mask != nullptr && (a.lq != 1 || a.mask_stride < 0))
    return invalid_input("cuda decode_attention: a mask needs lq 1 (lq ", a.lq, ") and a stride >= 0 (", a.mask_stride, ")");
  const bool tc = has_tc && a.kernel != DecodeKernel::kSimt;
  const detail::DecodeTraits tr = detail::decode_traits(a.dk, a.dv, tc);
  if (a.batch < 1 || a.q_heads < 1 || a.kv_heads < 1 || a.q_heads % a.kv_heads != 0)
    return invalid_input("cuda decode_attention: batch ", a.batch, ", q_heads ", a.q_heads, ", kv_heads ",
                         a.kv_heads, " (q_heads must be a positive multiple of kv_heads)");
  if (a.lq < 1 || a.lq > 8) return unsupported("cuda decode_attention: lq ", a.lq, " (1..8)");
  if (a.batch > 65535 || a.kv_heads > 65535)
    return unsupported("cuda decode_attention: batch/kv_heads over the grid limit 65535");
  if (!a.q || !a.k || !a.v || !a.lens || !a.out)
    return invalid_input("cuda decode_attention: q, k, v, lens and out must be set");
  if (!detail::aligned(a.k, 16) || !detail::aligned(a.v, 16) || !detail::aligned(a.q, 8) ||
      !detail::aligned(a.out, 4) || !detail::aligned(a.lens, 4) || !detail::aligned(a.read_map, 4) ||
      !detail::aligned(a.mask, 4) || !detail::aligned(a.ml, 4))
    return invalid_input("cuda decode_attention: k and v must be 16-byte aligned, q 8-byte, out, lens, read_map, mask and ml 4-byte");
  const int keys = a.read_map ? a.map_stride : a.capacity;
  if (keys < 1) return invalid_input("cuda decode_attention: ", a.read_map ? "map_stride" : "capacity", " ", keys);
  if (a.map_positions && (a.read_map == nullptr || a.capacity < 1))
    return invalid_input("cuda decode_attention: map_positions needs a read_map and the dense cache's capacity (", a.capacity, ")");
  if (a.max_len < 0 || a.max_len > keys)
    return invalid_input("cuda decode_attention: max_len ", a.max_len, " outside [0, ", keys, "]");
  if (a.softcap < 0.0f || a.window < 0) return invalid_input("cuda decode_attention: softcap/window < 0");
  const int n_rep = a.q_heads / a.kv_heads;
  const int qr = n_rep * a.lq;
  DecodePlan plan;
  plan.tensor_cores = tc;
  plan.rows = tc ? tr.max_rows : 1;
  while (plan.rows < qr && plan.rows < tr.max_rows) plan.rows *= 2;
  plan.row_blocks = (qr + plan.rows - 1) / plan.rows;

  // Splits: plan/decode_splits.h's rule over this device's SMs and the kernel's residency.
  const int sms = std::max(1, detail::sm_count());
  const bool paged = a.read_map != nullptr;
  const int span = std::max(1, a.max_len);
  const long pairs = static_cast<long>(a.batch) * a.kv_heads * plan.row_blocks;
  int splits = a.num_splits;
  if (splits <= 0) {
    splits = kvf::plan::decode_splits_for(tc, pairs, sms, blocks_per_sm(a.dk, plan.rows, paged, tc), span);
  }
  splits = std::clamp(splits, 1, 1024);
  plan.chunk = round_up((span + splits - 1) / splits, tr.keys_per_iter);
  plan.splits = std::max(1, (span + plan.chunk - 1) / plan.chunk);
  if (static_cast<long>(plan.splits) * plan.row_blocks > 0x7fffffffL)
    return unsupported("cuda decode_attention: too many blocks");
  if (plan.splits > 1) {
    const size_t rows = static_cast<size_t>(a.batch) * a.q_heads * a.lq;
    const size_t counters = static_cast<size_t>(pairs) * sizeof(unsigned);
    plan.counter_bytes = (counters + 255) / 256 * 256;  // the partials start 256-byte aligned
    plan.workspace_bytes = plan.counter_bytes + rows * plan.splits * (static_cast<size_t>(a.dv) + 2) * sizeof(float);
  }
  return plan;
}

Status decode_attention(const DecodeAttentionArgs& a, const DecodePlan& plan, void* workspace, void* stream) {
  if (plan.splits > 1 && workspace == nullptr)
    return invalid_input("cuda decode_attention: the plan needs ", plan.workspace_bytes, " bytes of workspace");
  if (plan.splits > 1 && !detail::aligned(workspace, 16))
    return invalid_input("cuda decode_attention: the workspace must be 16-byte aligned");
  detail::DecodeParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.map = a.read_map;
  p.map_positions = a.map_positions ? 1 : 0;
  p.lens = a.lens;
  p.alibi = a.alibi;
  p.mask = a.mask;
  p.mask_stride = a.mask_stride;
  p.out = a.out;
  p.ml = a.ml;
  const size_t rows = static_cast<size_t>(a.batch) * a.q_heads * a.lq;
  p.counters = static_cast<unsigned*>(workspace);
  p.part_acc = plan.splits > 1 ? reinterpret_cast<float*>(static_cast<char*>(workspace) + plan.counter_bytes) : nullptr;
  p.part_ml = plan.splits > 1 ? p.part_acc + rows * plan.splits * a.dv : nullptr;
  p.batch = a.batch;
  p.hq = a.q_heads;
  p.hkv = a.kv_heads;
  p.lq = a.lq;
  p.n_rep = a.q_heads / a.kv_heads;
  p.cap = a.capacity;
  p.map_stride = a.map_stride;
  p.splits = plan.splits;
  p.chunk = plan.chunk;
  p.chunks_from_lens = a.chunks_from_lens ? 1 : 0;
  if (a.chunks_from_lens) {
    p.chunk_align = detail::decode_traits(a.dk, a.dv, plan.tensor_cores).keys_per_iter;
    p.chunk = std::min(plan.chunk, round_up(128, p.chunk_align));
  }
  p.rows = plan.rows;
  p.row_blocks = plan.row_blocks;
  p.scale = a.scale;
  p.softcap = a.softcap;
  p.window = a.window;
  p.kv_f16 = a.kv_type == KvType::kF16 ? 1 : 0;
  p.tensor_cores = plan.tensor_cores ? 1 : 0;
  p.programmatic = a.programmatic ? 1 : 0;
  const bool early = a.programmatic && plan.tensor_cores;
  p.written_from = early && a.read_map == nullptr ? a.keys_written_from : nullptr;
  p.written_slots = early && a.read_map != nullptr && !a.map_positions && a.written_slot_count <= a.kMaxWrittenSlots
                        ? a.written_slots
                        : nullptr;
  p.written_slot_count = p.written_slots != nullptr ? a.written_slot_count : 0;
  int rc = 0;
  if (a.dk == 64) rc = detail::launch_decode_d64(p, stream);
  else if (a.dk == 128) rc = detail::launch_decode_d128(p, stream);
  else if (a.dk == 256) rc = detail::launch_decode_d256(p, stream);
  else if (a.dk == 192) rc = detail::launch_decode_d192_128(p, stream);
  else return unsupported("cuda decode_attention: dk ", a.dk);
  if (rc != 0)
    return internal_error("cuda decode_attention: launch failed: ",
                          cudaGetErrorString(static_cast<cudaError_t>(rc)));
  return Status();
}

Status merge_attention_partials(const PartialsMergeArgs& a, void* stream) {
  if (a.parts < 1 || a.rows < 0 || a.dv < 1)
    return invalid_input("cuda merge_attention_partials: parts ", a.parts, ", rows ", a.rows, ", dv ", a.dv);
  if (a.rows == 0) return Status();
  if (!a.o || !a.ml || !a.out) return invalid_input("cuda merge_attention_partials: o, ml and out must be set");
  if (!detail::aligned(a.o, 4) || !detail::aligned(a.ml, 4) || !detail::aligned(a.out, 4) ||
      !detail::aligned(a.out_ml, 4))
    return invalid_input("cuda merge_attention_partials: o, ml, out and out_ml must be 4-byte aligned");
  const int64_t o_stride = a.o_stride > 0 ? a.o_stride : int64_t{a.rows} * a.dv;
  const int64_t ml_stride = a.ml_stride > 0 ? a.ml_stride : int64_t{a.rows} * 2;
  if (o_stride < int64_t{a.rows} * a.dv || ml_stride < int64_t{a.rows} * 2 || a.o_stride < 0 || a.ml_stride < 0)
    return invalid_input("cuda merge_attention_partials: part strides ", a.o_stride, " and ", a.ml_stride, " overlap ",
                         a.rows, " rows of ", a.dv);
  const int rc = detail::launch_merge_partials({a.parts, a.rows, a.dv, a.o, a.ml, a.out, a.out_ml, o_stride, ml_stride},
                                               stream);
  if (rc != 0)
    return internal_error("cuda merge_attention_partials: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(rc)));
  return Status();
}

Status prepare_decode_workspace(const DecodePlan& plan, void* workspace, void* stream) {
  if (plan.counter_bytes == 0) return Status();
  if (workspace == nullptr) return invalid_input("cuda prepare_decode_workspace: no workspace");
  const cudaError_t e = cudaMemsetAsync(workspace, 0, plan.counter_bytes, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) return internal_error("cuda prepare_decode_workspace: ", cudaGetErrorString(e));
  return Status();
}

}  // namespace kvf::exec::cuda
