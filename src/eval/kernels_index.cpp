// Indexing primitives: gather rows, scatter rows (-1 skips), dynamic update slice.
// Every index is range-checked; a bad one is a typed error naming it.
#include <set>

#include "eval/kernels.h"

namespace kvf::eval {
namespace {

int64_t row_size(const Shape& s) {
  int64_t n = 1;
  for (size_t k = 1; k < s.size(); ++k) n *= s[k];
  return n;
}

}  // namespace

Result<Buffer> eval_gather(const KernelArgs& a) {
  const Buffer& table = *a.in[0];
  const Buffer& idx = *a.in[1];
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  const int64_t rows = table.shape[0], row = row_size(table.shape);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const auto r = static_cast<int64_t>(idx.data[static_cast<size_t>(i)]);
    if (r < 0 || r >= rows) return invalid_input("gather: index ", r, " at position ", i, " is outside a table of ", rows, " rows");
    std::copy_n(table.data.begin() + r * row, row, out->data.begin() + i * row);
  }
  return out;
}

Result<Buffer> eval_scatter_update(const KernelArgs& a) {
  Buffer out = *a.in[0];
  const Buffer& idx = *a.in[1];
  const Buffer& upd = *a.in[2];
  const int64_t rows = out.shape[0], row = row_size(out.shape);
  std::set<int64_t> written;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const auto r = static_cast<int64_t>(idx.data[static_cast<size_t>(i)]);
    if (r == -1) continue;  // padding token: writes nothing
    if (r < 0 || r >= rows) return invalid_input("scatter_update: index ", r, " at position ", i, " is outside ", rows, " rows");
    if (!written.insert(r).second) return invalid_input("scatter_update: row ", r, " is named twice");
    std::copy_n(upd.data.begin() + i * row, row, out.data.begin() + r * row);
  }
  return out;
}

Result<Buffer> eval_dynamic_update_slice(const KernelArgs& a) {
  Buffer out = *a.in[0];
  const Buffer& upd = *a.in[1];
  const auto start = static_cast<int64_t>(a.in[2]->data[0]);
  const auto axis = static_cast<size_t>(a.eqn.params.axis);
  const int64_t extent = out.shape[axis], n = upd.shape[axis];
  // No silent clamp (jax.lax clamps): a write past the end is an error the caller sees.
  if (start < 0) return invalid_input("dynamic_update_slice: negative start ", start);
  if (start + n > extent) {
    return capacity("dynamic_update_slice: ", n, " rows at ", start, " overflow axis ", axis, " of length ", extent);
  }
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= out.shape[k];
  for (size_t k = axis + 1; k < out.shape.size(); ++k) inner *= out.shape[k];
  for (int64_t o = 0; o < outer; ++o) {
    std::copy_n(upd.data.begin() + o * n * inner, n * inner, out.data.begin() + (o * extent + start) * inner);
  }
  return out;
}

}  // namespace kvf::eval
