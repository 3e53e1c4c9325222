// One eqn's launch: the kernel each op kind runs, its operands' shapes turned into the
// kernel's arguments. Fused launches (a linear group, a pack, a chain of small ops) and the
// validations come first; then elementwise ops, and each family of op kinds.
#include <algorithm>

#include "exec/cuda/step/eqn_args.h"
#include "exec/cuda/step/executor.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;

Status CudaExecutor::launch(const Op& op) {
  const ir::Eqn& e = plan_.graph.eqns[static_cast<size_t>(op.eqn)];
  const Launch l{device_.stream(), device_.fault(), op.eqn, tc_};
  if (op.pack.tasks > 0) {
    run_pack(op.pack, l);
    return {};
  }
  if (op.chain > 0) {
    pointwise_chain(static_cast<const ChainTask*>(chain_tasks_.data()) + op.chain_at, op.chain, l);
    return {};
  }
  if (op.validation >= 0) {
    check_witness(op.in[0].data, op.in[0].numel, op.validation, l);
    return {};
  }
  if (op.grouped > 0) {
    const Ref& x = op.in[0];
    const int64_t k = op.in[1].type.shape[1];
    linear_group(static_cast<const float*>(x.data), x.numel / k, k, op.in[1].type.dtype, op.group, l);
    return {};
  }
  const Ref& out = op.out;
  const Ref* in0 = op.in.empty() ? nullptr : &op.in[0];
  if (ir::is_unary(e.op)) {
    unary(unary_op(e.op), in0->type.dtype, in0->data, out.data, out.numel, l);
    return {};
  }
  if (ir::is_binary(e.op)) {
    const Walk w = broadcast_walk(out.type.shape, {&op.in[0].type.shape, &op.in[1].type.shape});
    binary(binary_op(e.op, e.params.cmp), in0->type.dtype, op.in[0].data, op.in[1].data, out.data, w, l);
    return {};
  }
  switch (e.op) {
    case OpKind::kAllReduce: return all_reduce(op);
    case OpKind::kReshape: case OpKind::kTranspose: case OpKind::kSlice: case OpKind::kBroadcast:
    case OpKind::kConcat: case OpKind::kIota: case OpKind::kCast: case OpKind::kGather:
      return launch_layout(op, e, l);
    case OpKind::kDynamicUpdateSlice: case OpKind::kScatterUpdate: return launch_state_write(op, e, l);
    case OpKind::kIndexerScores: case OpKind::kBlockTopK: case OpKind::kSelectedAttention: case OpKind::kAttention:
      return launch_attention(op, e, l);
    default: return launch_math(op, e, l);
  }
}

// Copies that move elements: reshape, transpose, slice, broadcast, concat, iota, cast, gather.
Status CudaExecutor::launch_layout(const Op& op, const ir::Eqn& e, const Launch& l) {
  const Ref& out = op.out;
  const Ref* in0 = op.in.empty() ? nullptr : &op.in[0];
  switch (e.op) {
    case OpKind::kReshape:
      return device_.copy_on_device(out.data, in0->data, out.numel * elem_bytes(out.type.dtype));
    case OpKind::kTranspose: {
      int64_t xs[kMaxRank], st[kMaxRank];
      strides_into(in0->type.shape, xs);
      for (size_t a = 0; a < e.params.axes.size(); ++a) st[a] = xs[e.params.axes[a]];
      strided_copy(static_cast<int>(elem_bytes(out.type.dtype)), in0->data, 0, out.data, 0,
                   copy_walk(out.type.shape, st, out.type.shape), l);
      return {};
    }
    case OpKind::kSlice: {
      int64_t xs[kMaxRank], st[kMaxRank];
      strides_into(in0->type.shape, xs);
      int64_t base = 0;
      for (size_t a = 0; a < in0->type.shape.size(); ++a) {
        base += e.params.starts[a] * xs[a];
        st[a] = xs[a] * (e.params.steps.empty() ? 1 : e.params.steps[a]);
      }
      strided_copy(static_cast<int>(elem_bytes(out.type.dtype)), in0->data, base, out.data, 0,
                   copy_walk(out.type.shape, st, out.type.shape), l);
      return {};
    }
    case OpKind::kBroadcast: {
      Walk w = broadcast_walk(out.type.shape, {&in0->type.shape});
      strides_into(out.type.shape, w.stride[1]);
      strided_copy(static_cast<int>(elem_bytes(out.type.dtype)), in0->data, 0, out.data, 0, w, l);
      return {};
    }
    case OpKind::kConcat: {
      const auto axis = static_cast<size_t>(e.params.axis);
      int64_t os[kMaxRank];
      strides_into(out.type.shape, os);
      int64_t at = 0;
      for (const Ref& x : op.in) {
        int64_t xs[kMaxRank];
        strides_into(x.type.shape, xs);
        Walk w = copy_walk(x.type.shape, xs, x.type.shape);
        for (int a = 0; a < w.rank && !x.type.shape.empty(); ++a) w.stride[1][a] = os[a];
        strided_copy(static_cast<int>(elem_bytes(out.type.dtype)), x.data, 0, out.data, at * os[axis], w, l);
        at += x.type.shape[axis];
      }
      return {};
    }
    case OpKind::kIota: {
      const Shape& s = out.type.shape;
      const auto axis = static_cast<size_t>(e.params.axis);
      int64_t inner = 1;
      for (size_t a = axis + 1; a < s.size(); ++a) inner *= s[a];
      iota(out.type.dtype, inner, s[axis], out.data, out.numel, l);
      return {};
    }
    case OpKind::kCast: cast(in0->type.dtype, out.type.dtype, in0->data, out.data, out.numel, l); return {};
    case OpKind::kGather: {
      const Ref& table = op.in[0];
      const int64_t rows = table.type.shape[0], row = table.numel / std::max<int64_t>(rows, 1);
      gather(table.type.dtype, table.data, rows, row, static_cast<const int32_t*>(op.in[1].data), op.in[1].numel,
             out.type.dtype, out.data, l);
      return {};
    }
    default: break;
  }
  return internal_error("exec/cuda: no kernel for ", ir::op_name(e.op));
}

// Writes into a state buffer (a cache): the buffer copied through, then the update at its rows.
Status CudaExecutor::launch_state_write(const Op& op, const ir::Eqn& e, const Launch& l) {
  const Ref& out = op.out;
  switch (e.op) {
    case OpKind::kDynamicUpdateSlice: {
      const Ref &base = op.in[0], &upd = op.in[1];
      const auto axis = static_cast<size_t>(e.params.axis);
      Status s = device_.copy_on_device(out.data, base.data, out.numel * elem_bytes(out.type.dtype));
      if (!s) return s;
      int64_t outer = 1, inner = 1;
      for (size_t k = 0; k < axis; ++k) outer *= out.type.shape[k];
      for (size_t k = axis + 1; k < out.type.shape.size(); ++k) inner *= out.type.shape[k];
      const auto* start = static_cast<const int32_t*>(op.in[2].data);
      if (op.round_update) {
        update_slice_rounded(out.type.dtype, static_cast<const float*>(upd.data), out.data, outer, out.type.shape[axis],
                             upd.type.shape[axis], inner, start, l);
      } else {
        update_slice(static_cast<int>(elem_bytes(out.type.dtype)), upd.data, out.data, outer, out.type.shape[axis],
                     upd.type.shape[axis], inner, start, l);
      }
      return {};
    }
    case OpKind::kScatterUpdate: {
      const Ref &base = op.in[0], &idx = op.in[1], &upd = op.in[2];
      Status s = device_.copy_on_device(out.data, base.data, out.numel * elem_bytes(out.type.dtype));
      if (!s) return s;
      const int64_t rows = out.type.shape[0], row = out.numel / std::max<int64_t>(rows, 1);
      const auto* slots = static_cast<const int32_t*>(idx.data);
      if (op.round_update) {
        scatter_rounded(out.type.dtype, slots, idx.numel, static_cast<const float*>(upd.data), out.data, rows, row,
                        !op.slots_checked, l);
      } else {
        scatter(static_cast<int>(elem_bytes(out.type.dtype)), slots, idx.numel, upd.data, out.data, rows, row,
                !op.slots_checked, l);
      }
      return {};
    }
    default: break;
  }
  return internal_error("exec/cuda: no kernel for ", ir::op_name(e.op));
}

// Selects, reductions, products, norms, rope, softmax, gated units, experts and adapters.
Status CudaExecutor::launch_math(const Op& op, const ir::Eqn& e, const Launch& l) {
  const Ref& out = op.out;
  const Ref* in0 = op.in.empty() ? nullptr : &op.in[0];
  switch (e.op) {
    case OpKind::kSelect: {
      const Walk w = broadcast_walk(out.type.shape, {&op.in[0].type.shape, &op.in[1].type.shape, &op.in[2].type.shape});
      select(static_cast<int>(elem_bytes(out.type.dtype)), op.in[0].data, op.in[1].data, op.in[2].data, out.data, w, l);
      return {};
    }
    case OpKind::kReduceSum: case OpKind::kReduceMax: {
      const Shape& s = in0->type.shape;
      const int64_t first = *std::min_element(e.params.axes.begin(), e.params.axes.end());
      const int64_t last = *std::max_element(e.params.axes.begin(), e.params.axes.end());
      int64_t outer = 1, red = 1, inner = 1;
      for (int64_t a = 0; a < static_cast<int64_t>(s.size()); ++a) {
        (a < first ? outer : a > last ? inner : red) *= s[static_cast<size_t>(a)];
      }
      reduce(e.op == OpKind::kReduceMax, in0->type.dtype, in0->data, out.data, outer, red, inner, l);
      return {};
    }
    case OpKind::kMatMul: {
      const Ref &a = op.in[0], &b = op.in[1];
      const Shape& os = out.type.shape;
      const int64_t m = a.type.shape[a.type.shape.size() - 2], k = a.type.shape.back(), n = b.type.shape.back();
      const Shape batch(os.begin(), os.end() - 2);
      const Shape ab(a.type.shape.begin(), a.type.shape.end() - 2), bb(b.type.shape.begin(), b.type.shape.end() - 2);
      matmul(static_cast<const float*>(a.data), static_cast<const float*>(b.data), static_cast<float*>(out.data), m, k, n,
             broadcast_walk(batch.empty() ? Shape{1} : batch, {&ab, &bb}), l);
      return {};
    }
    case OpKind::kLinear: {
      const Ref &x = op.in[0], &w = op.in[1];
      const int64_t n = w.type.shape[0], k = w.type.shape[1];
      linear(static_cast<const float*>(x.data), x.numel / k, k, w.type.dtype, w.data, n,
             e.params.has_bias ? static_cast<const float*>(op.in[2].data) : nullptr, static_cast<float*>(out.data), l);
      return {};
    }
    case OpKind::kRmsNorm: {
      const int64_t d = in0->type.shape.back();
      rmsnorm(static_cast<const float*>(in0->data), static_cast<const float*>(op.in[1].data), static_cast<float*>(out.data),
              in0->numel / d, d, e.params.eps, e.params.unit_offset, l);
      return {};
    }
    case OpKind::kRope:
      rope(rope_task(in0->data, in0->type.shape, in0->numel, op.in[1].data, op.in[2].data, e.params.rope, out.data), l);
      return {};
    case OpKind::kSoftmax: {
      const int64_t d = in0->type.shape.back();
      softmax(static_cast<const float*>(in0->data), static_cast<float*>(out.data), in0->numel / d, d, l);
      return {};
    }
    case OpKind::kGlu:
      glu(glu_act(e.params.glu), static_cast<const float*>(op.in[0].data), static_cast<const float*>(op.in[1].data),
          static_cast<float*>(out.data), out.numel, l);
      return {};
    case OpKind::kMoe: moe(moe_args(op), l); return {};
    case OpKind::kLora: {
      const Ref &x = op.in[0], &y = op.in[1], &a = op.in[2];
      const int64_t in = x.type.shape.back(), n = y.type.shape.back();
      lora({.y = static_cast<const float*>(y.data), .x = static_cast<const float*>(x.data), .rows = op.in[5].numel,
            .in = in, .out = n, .rank = a.type.shape[1] / in, .factors = a.type.dtype, .a = a.data, .b = op.in[3].data,
            .s = static_cast<const float*>(op.in[4].data), .ids = static_cast<const int32_t*>(op.in[5].data),
            .result = static_cast<float*>(out.data), .scratch = op.scratch},
           l);
      return {};
    }
    default: break;
  }
  return internal_error("exec/cuda: no kernel for ", ir::op_name(e.op));
}

// Attention and the selection that sparse attention reads.
Status CudaExecutor::launch_attention(const Op& op, const ir::Eqn& e, const Launch& l) {
  const Ref& out = op.out;
  switch (e.op) {
    case OpKind::kIndexerScores: {
      const Ref &q = op.in[0], &k = op.in[1];
      const Shape& qs = q.type.shape;
      indexer_scores({.q = static_cast<const float*>(q.data), .k = k.data, .k_f16 = k.type.dtype == DType::kF16,
                      .w = static_cast<const float*>(op.in[2].data), .rows = qs[0], .heads = qs[1], .n = qs[2],
                      .dim = qs[3], .keys = k.type.shape[2], .scale = static_cast<float>(e.params.scale),
                      .out = static_cast<float*>(out.data)},
                     l);
      return {};
    }
    case OpKind::kBlockTopK: {
      const Shape& s = op.in[0].type.shape;
      block_topk({.scores = static_cast<const float*>(op.in[0].data), .pos = static_cast<const int32_t*>(op.in[1].data),
                  .rows = s[0] * s[1], .blocks = s[2], .topk = e.params.topk, .ratio = e.params.ratio,
                  .out = static_cast<uint8_t*>(out.data)},
                 l);
      return {};
    }
    case OpKind::kSelectedAttention: {
      const Ref& sel = op.in[op.in.size() - 2];
      selected_attention({.attn = attention_args_of(op), .selected = static_cast<const uint8_t*>(sel.data),
                          .pos = static_cast<const int32_t*>(op.in.back().data), .blocks = sel.type.shape[2],
                          .ratio = e.params.ratio, .scratch = op.scratch},
                         l);
      return {};
    }
    case OpKind::kAttention:
      if (op.kv_parallel >= 0) return kv_parallel_attention(op);
      if (op.decode_kernel) return decode_attention(op.decode, op.decode_plan, decode_workspace_.data(), device_.stream());
      if (op.tiles) return step_prefill_attention(op.tile_args, device_.stream());
      attention_rows(attention_args_of(op), plan_.requests[static_cast<size_t>(op.eqn)].attention.splits, op.scratch, l);
      return {};
    default: break;
  }
  return internal_error("exec/cuda: no kernel for ", ir::op_name(e.op));
}

}  // namespace kvf::exec::cuda::step
