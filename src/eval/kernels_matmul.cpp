// Batched matmul with numpy-broadcast batch axes; f64 accumulation in plain loops.
// Rows are shared out over the pool: each element is still one sequential dot product.
#include "eval/kernels.h"

namespace kvf::eval {

Result<Buffer> eval_matmul(const KernelArgs& a) {
  const Buffer& x = *a.in[0];  // [..., M, K]
  const Buffer& y = *a.in[1];  // [..., K, N]
  Result<Buffer> out = Buffer::zeros(a.out_type.dtype, a.out_type.shape);
  if (!out) return out;
  const int64_t m = x.shape[x.shape.size() - 2], k = x.shape.back(), n = y.shape.back();
  const Shape batch(out->shape.begin(), out->shape.end() - 2);
  const Shape xb(x.shape.begin(), x.shape.end() - 2), yb(y.shape.begin(), y.shape.end() - 2);
  // Map every output batch index to the operand matrices it reads.
  std::vector<int64_t> x_mat, y_mat;
  for_each_broadcast(batch, {xb, yb}, [&](int64_t, std::span<const int64_t> o) {
    x_mat.push_back(o[0]);
    y_mat.push_back(o[1]);
  });
  const int64_t rows = static_cast<int64_t>(x_mat.size()) * m;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bi = r / m, i = r % m;
      const double* xr = x.data.data() + x_mat[static_cast<size_t>(bi)] * m * k + i * k;
      const double* ym = y.data.data() + y_mat[static_cast<size_t>(bi)] * k * n;
      double* orow = out->data.data() + r * n;
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t t = 0; t < k; ++t) acc += xr[t] * ym[t * n + j];
        orow[j] = acc;
      }
    }
  };
  if (a.pool) a.pool->parallel_for(rows, body, 4);
  else body(0, rows);
  return out;
}

}  // namespace kvf::eval
