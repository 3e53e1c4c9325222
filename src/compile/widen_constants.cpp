#include "compile/widen_constants.h"

#include "core/dtype.h"

namespace kvf::compile {
namespace {

Result<HostTensor> to_f16(const HostTensor& t) {
  Result<std::vector<float>> x = t.to_f32();
  if (!x) return x.take_error();
  Result<HostTensor> out = HostTensor::zeros(DType::kF16, t.shape());
  if (!out) return out;
  auto* h = out->data<uint16_t>();
  for (size_t i = 0; i < x->size(); ++i) h[i] = f32_to_f16_bits((*x)[i]);
  return out;
}

}  // namespace

Status widen_kquant_constants(ir::Graph& g, WidenedConstants& cache) {
  for (ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::kConstant || !is_kquant(v.type.dtype)) continue;
    auto it = cache.find(v.data.raw());
    if (it == cache.end()) {
      Result<HostTensor> h = to_f16(v.data);
      if (!h) return h.take_error().context("constant ", v.name);
      it = cache.emplace(v.data.raw(), std::move(*h)).first;
    }
    v.data = it->second;
    v.type.dtype = DType::kF16;
  }
  return ir::verify(g);
}

}  // namespace kvf::compile
