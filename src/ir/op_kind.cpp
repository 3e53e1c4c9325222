// Names and classes of the primitive opcodes.
#include "ir/op_kind.h"

namespace kvf::ir {

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::kNeg: return "neg";
    case OpKind::kExp: return "exp";
    case OpKind::kLog: return "log";
    case OpKind::kSqrt: return "sqrt";
    case OpKind::kRsqrt: return "rsqrt";
    case OpKind::kTanh: return "tanh";
    case OpKind::kErf: return "erf";
    case OpKind::kAbs: return "abs";
    case OpKind::kSin: return "sin";
    case OpKind::kCos: return "cos";
    case OpKind::kRecip: return "recip";
    case OpKind::kAdd: return "add";
    case OpKind::kSub: return "sub";
    case OpKind::kMul: return "mul";
    case OpKind::kDiv: return "div";
    case OpKind::kMax: return "max";
    case OpKind::kMin: return "min";
    case OpKind::kCompare: return "compare";
    case OpKind::kAnd: return "and";
    case OpKind::kOr: return "or";
    case OpKind::kSelect: return "select";
    case OpKind::kReduceSum: return "reduce_sum";
    case OpKind::kReduceMax: return "reduce_max";
    case OpKind::kReshape: return "reshape";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kSlice: return "slice";
    case OpKind::kConcat: return "concat";
    case OpKind::kIota: return "iota";
    case OpKind::kCast: return "cast";
    case OpKind::kGather: return "gather";
    case OpKind::kScatterUpdate: return "scatter_update";
    case OpKind::kDynamicUpdateSlice: return "dynamic_update_slice";
    case OpKind::kMatMul: return "matmul";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kAttention: return "attention";
    case OpKind::kRope: return "rope";
    case OpKind::kRmsNorm: return "rmsnorm";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kGlu: return "glu";
    case OpKind::kLinear: return "linear";
    case OpKind::kMoe: return "moe";
    case OpKind::kLora: return "lora";
    case OpKind::kBlockTopK: return "block_topk";
    case OpKind::kSelectedAttention: return "selected_attention";
    case OpKind::kIndexerScores: return "indexer_scores";
  }
  return "?";
}

std::string_view cmp_name(CmpDir dir) {
  switch (dir) {
    case CmpDir::kEq: return "eq";
    case CmpDir::kNe: return "ne";
    case CmpDir::kLt: return "lt";
    case CmpDir::kLe: return "le";
    case CmpDir::kGt: return "gt";
    case CmpDir::kGe: return "ge";
  }
  return "?";
}

bool is_unary(OpKind op) { return op <= OpKind::kRecip; }
bool is_binary(OpKind op) { return op >= OpKind::kAdd && op <= OpKind::kOr; }
bool is_fused(OpKind op) { return op >= OpKind::kAttention; }
bool is_reduce(OpKind op) { return op == OpKind::kReduceSum || op == OpKind::kReduceMax; }
bool is_collective(OpKind op) { return op == OpKind::kAllReduce; }

}  // namespace kvf::ir
