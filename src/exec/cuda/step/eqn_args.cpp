#include "exec/cuda/step/eqn_args.h"

#include <algorithm>

#include "plan/buffer_plan.h"

namespace kvf::exec::cuda::step {

using ir::OpKind;

int64_t elem_bytes(DType dt) { return std::max<int64_t>(plan::element_bytes(dt), 1); }

void strides_into(const Shape& s, int64_t* st) {
  const Shape c = contiguous_strides(s);
  std::copy(c.begin(), c.end(), st);
}

Walk broadcast_walk(const Shape& out, std::initializer_list<const Shape*> ops) {
  Walk w;
  w.rank = std::max<int>(1, static_cast<int>(out.size()));
  for (int a = 0; a < w.rank; ++a) w.shape[a] = out.empty() ? 1 : out[static_cast<size_t>(a)];
  int k = 0;
  for (const Shape* s : ops) broadcast_strides(*s, out, w.stride[k++]);
  w.numel = numel(out);
  return w;
}

Walk copy_walk(const Shape& shape, const int64_t* src, const Shape& dst_shape) {
  Walk w;
  w.rank = std::max<int>(1, static_cast<int>(shape.size()));
  int64_t dst[kMaxRank] = {};
  strides_into(dst_shape, dst);
  for (int a = 0; a < w.rank; ++a) {
    w.shape[a] = shape.empty() ? 1 : shape[static_cast<size_t>(a)];
    w.stride[0][a] = shape.empty() ? 0 : src[a];
    w.stride[1][a] = shape.empty() ? 0 : dst[a];
  }
  w.numel = numel(shape);
  return w;
}

UnaryOp unary_op(ir::OpKind op) {
  switch (op) {
    case OpKind::kNeg: return UnaryOp::kNeg;
    case OpKind::kExp: return UnaryOp::kExp;
    case OpKind::kLog: return UnaryOp::kLog;
    case OpKind::kSqrt: return UnaryOp::kSqrt;
    case OpKind::kRsqrt: return UnaryOp::kRsqrt;
    case OpKind::kTanh: return UnaryOp::kTanh;
    case OpKind::kErf: return UnaryOp::kErf;
    case OpKind::kAbs: return UnaryOp::kAbs;
    case OpKind::kSin: return UnaryOp::kSin;
    case OpKind::kCos: return UnaryOp::kCos;
    default: return UnaryOp::kRecip;
  }
}

BinaryOp binary_op(ir::OpKind op, ir::CmpDir cmp) {
  switch (op) {
    case OpKind::kAdd: return BinaryOp::kAdd;
    case OpKind::kSub: return BinaryOp::kSub;
    case OpKind::kMul: return BinaryOp::kMul;
    case OpKind::kDiv: return BinaryOp::kDiv;
    case OpKind::kMax: return BinaryOp::kMax;
    case OpKind::kMin: return BinaryOp::kMin;
    case OpKind::kAnd: return BinaryOp::kAnd;
    case OpKind::kOr: return BinaryOp::kOr;
    default: break;
  }
  switch (cmp) {
    case ir::CmpDir::kEq: return BinaryOp::kEq;
    case ir::CmpDir::kNe: return BinaryOp::kNe;
    case ir::CmpDir::kLt: return BinaryOp::kLt;
    case ir::CmpDir::kLe: return BinaryOp::kLe;
    case ir::CmpDir::kGt: return BinaryOp::kGt;
    case ir::CmpDir::kGe: return BinaryOp::kGe;
  }
  return BinaryOp::kEq;
}

GluAct glu_act(ir::GluAct a) {
  switch (a) {
    case ir::GluAct::kSilu: return GluAct::kSilu;
    case ir::GluAct::kGeluTanh: return GluAct::kGeluTanh;
    case ir::GluAct::kGeluErf: return GluAct::kGeluErf;
  }
  return GluAct::kSilu;
}

RopeTask rope_task(const void* x, const Shape& shape, int64_t numel, const void* cos, const void* sin,
                   const ir::RopeParams& p, void* out) {
  const ir::RopePositions at = ir::rope_positions(p, shape);
  return RopeTask{static_cast<const float*>(x), static_cast<const float*>(cos), static_cast<const float*>(sin),
                  static_cast<float*>(out), numel / shape.back(), shape.back(), at.t_len, at.every, p.rotary_dim,
                  p.layout == ir::RopeLayout::kInterleaved};
}

}  // namespace kvf::exec::cuda::step
