// The primitive opcodes of the graph IR (DESIGN.md §2) and their parameters.
// What an op computes lives in docs/ir.md and eval/; its typing rule lives in ir/infer.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace kvf::ir {

enum class OpKind : uint8_t {
  // unary, elementwise, float
  kNeg, kExp, kLog, kSqrt, kRsqrt, kTanh, kErf, kAbs, kSin, kCos, kRecip,
  // binary, elementwise with numpy broadcasting
  kAdd, kSub, kMul, kDiv, kMax, kMin,
  kCompare,  // -> pred; params.cmp
  kAnd, kOr,  // pred x pred -> pred
  kSelect,    // select(pred, on_true, on_false), all three broadcast
  // reductions over params.axes, params.keepdim
  kReduceSum, kReduceMax,
  // layout
  kReshape,    // params.shape
  kTranspose,  // params.perm
  kBroadcast,  // params.shape (numpy rules: leading axes added, size-1 axes stretched)
  kSlice,      // params.starts/limits/steps, static
  kConcat,     // params.axis
  kIota,       // params.shape, params.axis, params.dtype; no operands
  kCast,       // params.dtype
  // indexing
  kGather,              // table [N, ...], idx i32 [...I] -> [...I, ...]; rows along axis 0
  kScatterUpdate,       // base [N, ...], idx i32 [M], upd [M, ...]; idx -1 writes nothing
  kDynamicUpdateSlice,  // base, update, start i32 [1]: update placed at start along params.axis
  kMatMul,              // [..., M, K] x [..., K, N] -> [..., M, N], batch axes broadcast
};

enum class CmpDir : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

std::string_view op_name(OpKind op);
std::string_view cmp_name(CmpDir dir);

bool is_unary(OpKind op);
bool is_binary(OpKind op);  // includes compare/and/or, excludes select
bool is_reduce(OpKind op);

// Static parameters; each op reads only the fields docs/ir.md lists for it.
struct Params {
  std::vector<int64_t> axes;    // reduce axes; transpose permutation
  std::vector<int64_t> shape;   // reshape / broadcast / iota result shape
  std::vector<int64_t> starts;  // slice
  std::vector<int64_t> limits;  // slice
  std::vector<int64_t> steps;   // slice
  int64_t axis = 0;             // concat, iota, dynamic_update_slice
  bool keepdim = false;         // reduce
  CmpDir cmp = CmpDir::kEq;     // compare
  DType dtype = DType::kF32;    // cast, iota
};

}  // namespace kvf::ir
