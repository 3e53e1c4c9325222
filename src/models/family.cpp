// Shared tracer pieces.
#include "models/family.h"

namespace kvf::models {

ir::V weight(ir::Builder& b, const Weights& w, const std::string& name, const Shape& shape) {
  Result<HostTensor> t = w.get(name, shape);
  if (!t) {
    b.fail(t.take_error());
    return b.literal(0.0);
  }
  const DType stored = t->dtype();
  ir::V v = b.constant(name, std::move(*t));
  return stored == DType::kF32 ? v : b.cast(v, DType::kF32);
}

ir::V split_heads(ir::V x, int64_t heads, int64_t head_dim) {
  ir::Builder& b = *x.b;
  const int64_t n = x.dim(1);
  return b.transpose(b.reshape(x, {1, n, heads, head_dim}), {0, 2, 1, 3});
}

ir::V merge_heads(ir::V x) {
  ir::Builder& b = *x.b;
  const int64_t heads = x.dim(1), n = x.dim(2), hd = x.dim(3);
  return b.reshape(b.transpose(x, {0, 2, 1, 3}), {1, n, heads * hd});
}

}  // namespace kvf::models
